// Package tracingtest runs a real trace backend for the tests: Jaeger v2's
// all-in-one (its OTLP receiver over HTTP/protobuf and gRPC, in-memory
// storage, and its query API), on loopback ports only, and reads a trace
// back from it as the OTLP JSON its query API answers. Only tests import it.
//
// The binary is built from tools/jaeger (its own module, pinned) by
// .ci/run; locally a test without it skips with one line saying how to
// install it, and under CI=true it fails.
package tracingtest
