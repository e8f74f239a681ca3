// Package config loads car-server's settings in one place, with viper:
// defaults < config file ($CAR_HOME/config.yaml or --config) < CAR_*
// environment < command-line flags. It also derives the file locations of
// the state root (token, socket, lock).
//
// Load takes the arguments and environment it reads as parameters, so that
// nothing else in the daemon reads flags or the environment.
package config
