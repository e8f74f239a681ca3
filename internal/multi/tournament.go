package multi

import (
	"context"
	"fmt"
	"strings"
)

// Tournament has every competitor answer, then a single-elimination bracket
// judged pairwise by a fresh judge per match. With an odd number left, the
// last one gets a bye. A competitor that failed loses its match; a judge
// that fails, is refused or answers neither A nor B gives the match to A.
// ranking orders competitors by the round they fell in, winner first.
func (c *Coordinator) Tournament(ctx context.Context, p TournamentParams) (TournamentResult, error) {
	if err := needAgents("competitors", p.Competitors, p.Task); err != nil {
		return TournamentResult{}, err
	}
	if p.Judge.Name == "" {
		return TournamentResult{}, fmt.Errorf("judge needs a name")
	}
	res := TournamentResult{Task: p.Task, Candidates: c.runAll(ctx, p.Competitors, repeat(p.Task, len(p.Competitors))), Matches: []MatchResult{}}
	alive := make([]int, len(p.Competitors))
	for i := range alive {
		alive[i] = i
	}
	fell := make([]int, len(p.Competitors)) // round eliminated in; the winner keeps 0
	round := 0
	for len(alive) > 1 {
		round++
		var next []int
		for k := 0; k+1 < len(alive); k += 2 {
			a, b := alive[k], alive[k+1]
			m, aWins := c.match(ctx, p, round, a, b, res.Candidates)
			res.Matches = append(res.Matches, m)
			if aWins {
				next = append(next, a)
				fell[b] = round
			} else {
				next = append(next, b)
				fell[a] = round
			}
		}
		if len(alive)%2 == 1 {
			last := alive[len(alive)-1]
			res.Matches = append(res.Matches, MatchResult{Round: round, A: res.Candidates[last].Name, Winner: res.Candidates[last].Name, Bye: true, Reason: "odd one out: a bye"})
			next = append(next, last)
		}
		alive = next
	}
	w := alive[0]
	res.WinnerName, res.WinnerAnswer = res.Candidates[w].Name, res.Candidates[w].Answer
	res.Ranking = []string{res.WinnerName}
	for r := round; r >= 1; r-- {
		for i, f := range fell {
			if f == r {
				res.Ranking = append(res.Ranking, res.Candidates[i].Name)
			}
		}
	}
	res.Spend = c.Spend()
	return res, nil
}

// match judges a against b and reports whether a advances.
func (c *Coordinator) match(ctx context.Context, p TournamentParams, round, a, b int, cands []AgentOutput) (MatchResult, bool) {
	ca, cb := cands[a], cands[b]
	m := MatchResult{Round: round, A: ca.Name, B: cb.Name}
	switch {
	case ca.Failed() && !cb.Failed():
		m.Winner, m.Reason = cb.Name, "A produced no answer"
		return m, false
	case cb.Failed():
		m.Winner, m.Reason = ca.Name, "B produced no answer"
		return m, true
	}
	j := c.run(ctx, p.Judge, fmt.Sprintf("%s\n\nCandidate A (%s):\n%s\n\nCandidate B (%s):\n%s\n\nReply with A or B: which answer is better?", p.Task, ca.Name, ca.Answer, cb.Name, cb.Answer))
	m.Judge = &j
	answer := strings.TrimSpace(j.Answer)
	verdict := ""
	if f := strings.Fields(answer); len(f) > 0 {
		verdict = strings.ToUpper(strings.Trim(f[0], ".,:;!()[]\"'"))
	}
	aWins := true
	switch {
	case j.Failed():
		m.Reason = "the judge gave no verdict; A advances"
	case verdict == "B" || strings.EqualFold(answer, cb.Name):
		aWins, m.Reason = false, "judged better"
	case verdict == "A" || strings.EqualFold(answer, ca.Name):
		m.Reason = "judged better"
	default:
		m.Reason = "the judge answered neither A nor B; A advances"
	}
	m.Winner = ca.Name
	if !aWins {
		m.Winner = cb.Name
	}
	return m, aWins
}
