package main

import (
	"go.uber.org/zap"

	"github.com/parslee-ai/car-server/config"
	"github.com/parslee-ai/car-server/internal/engine"
)

// reloadIntent re-reads the operator's intent.json, as reloadPolicies does
// the policies: a good file (or none) replaces the intent in force; a bad
// one keeps it and logs why. The gate and the taint ledger stay: the intent
// is swapped under them.
func reloadIntent(rt *engine.Runtime, cfg *config.Config, log *zap.Logger) {
	in, err := engine.LoadIntentFile(cfg.IntentPath, cfg.Integrity.MaxIntentPatterns, cfg.Integrity.MaxIntentTextBytes)
	if err != nil {
		log.Error("intent reload failed; the previous intent stays in force", zap.String("path", cfg.IntentPath), zap.Error(err))
		return
	}
	rt.SetOperatorIntent(in)
	logIntent(log, "operator intent reloaded", cfg.IntentPath, in)
}

func logIntent(log *zap.Logger, msg, path string, in *engine.WorkIntent) {
	if in == nil {
		log.Info(msg+": none; the intent gate applies only the connections' own", zap.String("path", path))
		return
	}
	log.Info(msg, zap.String("path", path), zap.Int("allowed_tools", len(in.AllowedTools)), zap.Int("forbidden_tools", len(in.ForbiddenTools)),
		zap.Int("forbidden_capabilities", len(in.ForbiddenCapabilities)), zap.Int("untrusted_tools", len(in.UntrustedTools)))
}
