package ui_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/parslee-ai/car-server/client"
	"github.com/parslee-ai/car-server/internal/policy"
	"github.com/parslee-ai/car-server/protocol"
)

// TestAQuorumCardCountsThePeople: a deploy a quorum rule gives to two
// people shows "0 of 2", then "1 of 2 approvals (person:alice)" once alice
// approved from her own connection, and stays; the page's own approval (the
// operator's) is the second and releases it.
func TestAQuorumCardCountsThePeople(t *testing.T) {
	d := startDaemon(t, hostToken)
	d.rt.SetOperatorPolicies(policy.NewEngine(policy.Policy{Name: "quorum:deploy_*", Rule: policy.Quorum{Tool: "deploy_*", Approvers: 2}}))
	const aliceToken = "alice-token-for-the-dashboard-tests"
	if err := d.people().Issue(ctxT(t), "alice", aliceToken); err != nil {
		t.Fatal(err)
	}
	alice, err := client.Dial(ctxT(t), d.wsURL(), &client.Options{HostToken: aliceToken})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	p := openPage(t, d.pageURL())
	p.ready()
	r := newRunner(t, d, map[string]tool{"deploy_service": echo})
	sub := r.submit(t, "p-quorum", "deploy_service", map[string]any{"env": "prod"})

	card := `document.querySelector("#approvals li.approval")`
	p.until("the card to ask for two people", card+`?.querySelector(".quorum")?.textContent === "0 of 2 approvals"`)
	id := eval[string](p, card+`.dataset.id`)
	var now protocol.HostApproval
	if err := alice.Call(ctxT(t), protocol.MethodHostResolveApproval, map[string]any{"approval_id": id, "approved": true}, &now); err != nil {
		t.Fatal(err)
	}
	if now.Status != "pending" || len(now.Approvers) != 1 || now.Approvers[0] != "person:alice" {
		t.Fatalf("after alice the approval is %+v", now)
	}
	p.until("the card to count alice", card+`?.querySelector(".quorum")?.textContent === "1 of 2 approvals (person:alice)"`)

	p.do(chromedp.Click(chromedp.CSS("#approvals li.approval button.approve")))
	if res, err := resultOf(sub.wait(t), "a1"); err != nil || res.Status != protocol.StatusSucceeded {
		t.Fatalf("after the second person: %+v %v", res, err)
	}
	p.until("the card to go", card+` === null`)
}
