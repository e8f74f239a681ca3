// Command gen writes the OpenRPC document to standard output (make openrpc).
package main

import (
	"fmt"
	"os"

	"github.com/parslee-ai/car-server/internal/openrpc"
)

func main() {
	doc, err := openrpc.Document()
	if err != nil {
		fmt.Fprintf(os.Stderr, "openrpc: %v\n", err)
		os.Exit(1)
	}
	if _, err := os.Stdout.Write(doc); err != nil {
		fmt.Fprintf(os.Stderr, "openrpc: write: %v\n", err)
		os.Exit(1)
	}
}
