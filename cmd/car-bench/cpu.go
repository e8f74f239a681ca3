package main

import (
	"fmt"
	"os"
	"time"
)

// Once every connection is waiting on the daemon, a closed loop's latency
// is its work: each connection's call waits for the CPU of everyone else's
// (Little's law: latency = connections × CPU per call / cores). The ratio
// of a proposal's latency to a round trip's then follows the ratio of their
// CPU, in both processes, since car-bench shares the machine. The cpu
// meter measures that CPU per phase, so that a run shows how much of a
// latency ratio is work and how much is waiting out of turn.

// cpuCost is the CPU time one unit of a phase took, in microseconds: a
// round trip in the baseline, a proposal after it.
type cpuCost struct {
	DaemonUs float64 `json:"daemon_us"` // 0 when the daemon's process is not known
	BenchUs  float64 `json:"bench_us"`
}

func (c cpuCost) total() float64 { return c.DaemonUs + c.BenchUs }

func (c cpuCost) text() string {
	if c.DaemonUs == 0 {
		return fmt.Sprintf("car-bench %.1f µs (the daemon's is read with --spawn or --pid)", c.BenchUs)
	}
	return fmt.Sprintf("daemon %.1f µs + car-bench %.1f µs = %.1f µs", c.DaemonUs, c.BenchUs, c.total())
}

// cpuReport is the CPU of the two phases of a load run. The proposal phase
// includes the round trips sent beside the proposals (one per ten).
type cpuReport struct {
	PerRoundTrip cpuCost `json:"per_round_trip"`
	PerProposal  cpuCost `json:"per_proposal"`
	// ProposalToRoundTrip is a proposal's CPU over a round trip's, both
	// processes counted when the daemon's is known, car-bench's alone
	// otherwise.
	ProposalToRoundTrip float64 `json:"proposal_to_round_trip"`
	// P99RatioToCPURatio is the proposal p99 over the round-trip p99,
	// divided by ProposalToRoundTrip: what of the latency ratio their CPU
	// does not account for. At 1 or below, proposals waited no longer
	// than their work and their place in line.
	P99RatioToCPURatio float64 `json:"p99_ratio_to_cpu_ratio"`
}

// cpuMeter reads the CPU time of car-bench and, when its process id is
// known, of the daemon (cpuTime: Linux; elsewhere it reads nothing and the
// report has no CPU figures).
type cpuMeter struct {
	daemon int // 0: unknown
	self   int
}

// cpuMark is the CPU both processes had used at one moment.
type cpuMark struct {
	daemon, self time.Duration
	ok           bool
}

func newCPUMeter(daemonPID int) *cpuMeter {
	return &cpuMeter{daemon: daemonPID, self: os.Getpid()}
}

func (m *cpuMeter) mark() cpuMark {
	self, err := cpuTime(m.self)
	if err != nil {
		return cpuMark{}
	}
	mk := cpuMark{self: self, ok: true}
	if m.daemon > 0 {
		if d, err := cpuTime(m.daemon); err == nil {
			mk.daemon = d
		} else {
			m.daemon = 0 // gone or unreadable: report car-bench's alone
		}
	}
	return mk
}

// per returns the CPU used since from, per one of n units, and false when
// it could not be read.
func (m *cpuMeter) per(from cpuMark, n int) (cpuCost, bool) {
	to := m.mark()
	if !from.ok || !to.ok || n <= 0 {
		return cpuCost{}, false
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
	c := cpuCost{BenchUs: us(to.self - from.self)}
	if m.daemon > 0 {
		c.DaemonUs = us(to.daemon - from.daemon)
	}
	return c, true
}
