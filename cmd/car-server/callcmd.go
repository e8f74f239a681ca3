package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sourcegraph/jsonrpc2"
)

const callUsage = `usage: car-server call METHOD [PARAMS_JSON | -]

Sends one JSON-RPC request to the running daemon over its Unix socket, with
the operator's credential, and prints the result as JSON on one line (pipe it
to jq). PARAMS_JSON is an object or array; - reads it from standard input.
openrpc.json (or car-server call rpc.discover) lists the methods.
Exit codes: 0 ok, 1 the daemon answered an error, 2 usage, 3 daemon not reachable, 4 wrong token.`

// runCallCommand sends one request and prints its result: the daemon made
// scriptable from a shell.
func runCallCommand(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) < 1 || len(args) > 2 || args[0] == "" || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, callUsage)
		return exitUsage
	}
	method := args[0]
	var params json.RawMessage
	if len(args) == 2 {
		text := []byte(args[1])
		if args[1] == "-" {
			var err error
			if text, err = io.ReadAll(stdin); err != nil {
				fmt.Fprintf(stderr, "car-server call: read params from standard input: %v\n", err)
				return exitUsage
			}
		}
		if !json.Valid(text) {
			fmt.Fprintf(stderr, "car-server call: PARAMS_JSON is not valid JSON; quote it for the shell, e.g. '{\"key\":\"k\"}'\n")
			return exitUsage
		}
		if t := bytes.TrimSpace(text); t[0] != '{' && t[0] != '[' {
			fmt.Fprintf(stderr, "car-server call: PARAMS_JSON must be a JSON object or array (JSON-RPC params), got %s\n", t)
			return exitUsage
		}
		params = text
	}

	cfg, code := loadConfig(command{}, nil, stdout, stderr)
	if cfg == nil {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, code := dialDaemon(ctx, cfg, stderr)
	if c == nil {
		return code
	}
	defer c.Close()
	var p any
	if params != nil {
		p = params
	}
	var out json.RawMessage
	if err := c.Call(ctx, method, p, &out); err != nil {
		var rerr *jsonrpc2.Error
		if errors.As(err, &rerr) {
			fmt.Fprintf(stderr, "car-server call %s: error %d: %s\n", method, rerr.Code, rerr.Message)
		} else {
			fmt.Fprintf(stderr, "car-server call %s: %v\n", method, err)
		}
		return exitFailed
	}
	fmt.Fprintln(stdout, string(out))
	return exitOK
}
