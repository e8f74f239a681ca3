package jsonvalue

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// proposalFrame is a proposal.submit frame of 300 chained tool calls.
func proposalFrame() []byte {
	var sb strings.Builder
	sb.WriteString(`{"jsonrpc":"2.0","id":5,"method":"proposal.submit","params":{"proposal":{"actions":[`)
	for i := 0; i < 300; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"dependencies":["a%d"],"id":"a%d","parameters":{"i":%d},"tool":"bench_noop","type":"tool_call"}`, i-1, i, i)
	}
	sb.WriteString(`]}}}`)
	return []byte(sb.String())
}

// BenchmarkValid compares Valid with json.Valid on a proposal frame.
func BenchmarkValid(b *testing.B) {
	frame := proposalFrame()
	for _, c := range []struct {
		name  string
		valid func([]byte) bool
	}{{"jsonvalue", Valid}, {"encoding_json", json.Valid}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			for i := 0; i < b.N; i++ {
				if !c.valid(frame) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
