package rpc

import (
	"context"
	"crypto/ed25519"
	"fmt"

	"github.com/parslee-ai/car-server/internal/auditlog"
	"github.com/parslee-ai/car-server/internal/engine"
	"github.com/parslee-ai/car-server/internal/store"
	"github.com/parslee-ai/car-server/protocol"
)

// CheckEventLine checks one event line of a segment the way the engine
// hashes it (engine.CheckRecord): auditlog.VerifyOptions.CheckEvent.
func CheckEventLine(l *auditlog.Line) error {
	r := store.EventRecord{Node: l.Node, Seq: l.Seq, At: l.At, Kind: l.Kind, ProposalID: l.ProposalID, Hash: l.Hash, PrevHash: l.PrevHash, Body: l.Body}
	return engine.CheckRecord(&r)
}

// FileAuditCheck is Options.AuditCheck for the file store's durable log in
// dir, signed with the key at keyPath: what car-server audit verify checks.
func FileAuditCheck(dir, keyPath string) func(context.Context) (protocol.AuditStatus, error) {
	return func(context.Context) (protocol.AuditStatus, error) {
		key, err := auditlog.LoadKey(keyPath)
		if err != nil {
			return protocol.AuditStatus{}, err
		}
		rep, err := auditlog.Verify(auditlog.VerifyOptions{Dir: dir, Public: key.Public().(ed25519.PublicKey), CheckEvent: CheckEventLine})
		st := protocol.AuditStatus{Log: "file", OK: err == nil, Events: rep.Events, FirstSeq: rep.FirstSeq, LastSeq: rep.LastSeq, Heads: rep.Heads}
		if err != nil {
			st.Failure = err.Error()
		}
		if h := rep.HeadFile; h != nil {
			st.Head = &protocol.AuditHead{Seq: h.Seq, At: h.Time, Node: h.Node}
		}
		return st, nil
	}
}

// ChainAuditCheck is Options.AuditCheck for a shared log (kind names it)
// read through read: every daemon's chain (engine.VerifyChains).
func ChainAuditCheck(kind string, read engine.ReadSince) func(context.Context) (protocol.AuditStatus, error) {
	return func(ctx context.Context) (protocol.AuditStatus, error) {
		rep, err := engine.VerifyChains(ctx, read, false)
		if err != nil {
			return protocol.AuditStatus{}, err
		}
		st := protocol.AuditStatus{Log: kind, OK: rep.TamperedAt == nil, Daemons: len(rep.Nodes)}
		if rep.Verified != nil {
			st.Events = *rep.Verified
		}
		for _, n := range rep.Nodes {
			if n.Tampered != nil {
				st.Failure = fmt.Sprintf("daemon %s's chain breaks at seq %d: an event edited, deleted or reordered, or refused by the database when written", n.Node, *n.Tampered)
				break
			}
		}
		return st, nil
	}
}
