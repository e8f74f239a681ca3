// Package config loads car-server's settings in one place, with viper:
// defaults < config file ($CAR_HOME/config.yaml or --config) < CAR_*
// environment < command-line flags. Viper decides the precedence from one
// list of settings (settings.go) that also prints --help; Load only reads
// the winning values with their types. It also derives the file locations
// of the state root (token, socket, lock).
//
// Load reads the flags and the CAR_* settings of the environment itself, so
// that the rest of the daemon is given a Config rather than reading them.
// A default that a package's Options also applies to a zero field (the tool
// timeout, the frame and connection limits…) is that package's exported
// constant, so config imports those packages (engine, rpc, host, streams,
// runs, store/file, store/postgres) and none of them imports config. Config therefore links
// the daemon: a command that is not the daemon (car-bench) imports a leaf
// such as internal/netaddr rather than config.
package config
