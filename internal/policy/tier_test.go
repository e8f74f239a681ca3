package policy

import (
	"encoding/json"
	"testing"
)

func TestTierString(t *testing.T) {
	cases := []struct {
		tier Tier
		want string
	}{
		{ReadOnly, "read_only"},
		{SandboxEdit, "sandbox_edit"},
		{FullAccess, "full_access"},
		{Tier(7), "tier(7)"},
		{Tier(-1), "tier(-1)"},
	}
	for _, tc := range cases {
		if got := tc.tier.String(); got != tc.want {
			t.Errorf("Tier(%d).String() = %q, want %q", int(tc.tier), got, tc.want)
		}
	}
}

// An out-of-range tier must not be written out as a name that ParseTier
// would then reject on the way back in.
func TestTierMarshalText(t *testing.T) {
	for _, tier := range []Tier{ReadOnly, SandboxEdit, FullAccess} {
		b, err := json.Marshal(tier)
		if err != nil {
			t.Fatalf("marshal %d: %v", int(tier), err)
		}
		var back Tier
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("unmarshal %s: %v", b, err)
		}
		if back != tier {
			t.Fatalf("round trip of %s gave %s", tier, back)
		}
	}
	if b, err := json.Marshal(Tier(7)); err == nil {
		t.Fatalf("marshal Tier(7) = %s, want an error", b)
	}
}
