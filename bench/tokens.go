package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/text"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/store"
	"github.com/npcd/npcd/tick"
)

// TokenMeasure is one strategy's prompt cost and recall in a bench tokens run.
type TokenMeasure struct {
	Strategy string  `json:"strategy"`
	Ticks    int     `json:"ticks"`
	Mean     int     `json:"mean"`
	P50      int     `json:"p50"`
	P95      int     `json:"p95"`
	Total    int64   `json:"total"`
	Share    float64 `json:"share_of_unbounded"`
	Facts    int     `json:"facts"`
	Reached  int     `json:"facts_reachable"`
	Recall   float64 `json:"facts_reachable_share"`
	// Compactions and SummarizerCalls are what npcd's run compacted and
	// the summarizer calls that cost (the baselines make none), with those
	// calls per 1,000 ticks.
	Compactions int `json:"compactions,omitempty"`
	// CompactionsBy counts them by trigger: inside the ticks (emergency),
	// beside them (background), the sleeps'.
	CompactionsBy     map[string]int `json:"compactions_by_trigger,omitempty"`
	SummarizerCalls   int64          `json:"summarizer_calls,omitempty"`
	SummarizerPer1000 float64        `json:"summarizer_calls_per_1000_ticks,omitempty"`
}

// TokenOptions are what one run of Tokens replays.
type TokenOptions struct {
	Turns      int  // turns to replay
	Window     int  // context window of the NPC (and of the truncation baseline)
	ObsBytes   int  // size of each look observation
	FactEvery  int  // a fact is planted every this many turns
	SleepEvery int  // a sleep every this many turns; 0 never
	JSON       bool // one JSON object a line per strategy
}

// Check refuses bad options, naming the flag of npcd bench tokens.
func (o TokenOptions) Check() error {
	switch {
	case o.Turns < 1:
		return fmt.Errorf("--turns must be at least 1")
	case o.FactEvery < 1:
		return fmt.Errorf("--fact-every must be at least 1")
	case o.ObsBytes < 1:
		return fmt.Errorf("--observation-bytes must be at least 1")
	case o.SleepEvery < 0:
		return fmt.Errorf("--sleep-every must not be negative")
	}
	return nil
}

// plantedFact is an order a named traveler placed; it is reachable when a
// text holds both its item and its price.
type plantedFact struct {
	who, item, price string
}

func (f plantedFact) in(text string) bool {
	text = strings.ToLower(text)
	return strings.Contains(text, f.item) && strings.Contains(text, f.price)
}

var (
	benchNameHeads = []string{"Ad", "Bel", "Cor", "Dun", "Eld", "Fen", "Gar", "Hal", "Isk", "Jor", "Kel", "Lor", "Mar", "Nor", "Orm", "Per"}
	benchNameTails = []string{"ric", "wen", "ana", "dric", "mund", "eth", "ora", "wyn"}
	benchItems     = []string{"iron hinges", "horseshoes", "wagon nails", "sickle blades", "door bolts", "kettle hooks", "axe heads", "chain links", "spear points", "plough shares", "barrel hoops", "cart axles"}
)

// benchFact returns the i-th planted fact; names are unique up to 128 facts
// and repeat after that with other orders.
func benchFact(i int) plantedFact {
	name := benchNameHeads[i%len(benchNameHeads)] + benchNameTails[(i/len(benchNameHeads))%len(benchNameTails)]
	if i >= len(benchNameHeads)*len(benchNameTails) {
		name += fmt.Sprintf(" the %d", i/(len(benchNameHeads)*len(benchNameTails))+1)
	}
	return plantedFact{who: name, item: benchItems[(i*7)%len(benchItems)], price: fmt.Sprintf("%d silver", 11+(i*37)%89)}
}

// Tokens replays one long run through the engine and, from the same
// messages, prices what an unbounded history and a drop-the-oldest-half
// truncation would have sent.
func Tokens(ctx context.Context, out, progress io.Writer, h Harness, o TokenOptions) error {
	if err := o.Check(); err != nil {
		return err
	}
	a, done, err := h.Open(ctx, Options{})
	if err != nil {
		return err
	}
	defer done()
	room := forgeRoom(o.ObsBytes)
	c := benchNPC("brom")
	c.ContextWindow = o.Window
	c.Tools = store.NewJSON(append(character.DefaultTools(),
		character.ToolSpec{Name: "look", Description: "Look around", Parameters: map[string]any{"type": "object"}, Returns: true}))
	if _, err := a.Engine.PutNPC(ctx, c); err != nil {
		return err
	}
	if c, err = a.Chars.Get(ctx, c.ID); err != nil {
		return err
	}

	var facts []plantedFact
	var npcd, unbounded, truncated []int
	var history []int         // token cost of every message so far, oldest first
	var historyTotal int      // sum of history
	var keptFrom, keptSum int // index into history where kept starts, and its sum
	var lastID int64
	limit := c.ContextWindow - c.MaxOutputTokens - llm.ReplyPriming

	for turn := 0; turn < o.Turns; turn++ {
		var text string
		actor := "alice"
		switch {
		case turn%o.FactEvery == o.FactEvery/2:
			f := benchFact(len(facts))
			facts = append(facts, f)
			actor = f.who
			text = fmt.Sprintf("I am %s. Put me down for a dozen %s; I will pay %s when I collect them.", f.who, f.item, f.price)
		case turn%3 == 0:
			text = fmt.Sprintf("Turn %d: can you look around for my sword?", turn)
		default:
			text = fmt.Sprintf("Turn %d: the north road is busy today, and the miller's cart lost a wheel again.", turn)
		}
		if _, _, err := a.Engine.PostEvents(ctx, c.ID, []tick.EventInput{{Kind: "say", Actor: actor, Text: text}}); err != nil {
			return err
		}
		for {
			res, err := a.Engine.Tick(ctx, c.ID)
			if err != nil {
				return err
			}
			// A game ticks an NPC again seconds later, time enough for
			// a compaction started beside the ticks to end first.
			<-a.Engine.Compacting(c.ID)
			if res.Idle {
				break
			}
			// What this tick wrote: its inputs came before the first
			// reply, and the baselines would have sent them too.
			msgs, err := a.Chars.History(ctx, c.ID, character.HistoryQuery{After: lastID})
			if err != nil {
				return err
			}
			fixed := res.Context.SystemTokens + res.Context.ToolTokens + llm.ReplyPriming
			tickUnbounded, tickTruncated, i := 0, 0, 0
			for calls := 0; calls < max(1, res.Usage.LLMCalls); calls++ {
				for ; i < len(msgs) && msgs[i].Role != llm.RoleAssistant; i++ {
					if msgs[i].Summary {
						continue
					}
					history = append(history, msgs[i].Tokens)
					historyTotal += msgs[i].Tokens
					keptSum += msgs[i].Tokens
				}
				for fixed+keptSum > limit && keptFrom < len(history) {
					half := keptFrom + max(1, (len(history)-keptFrom)/2)
					for ; keptFrom < half; keptFrom++ {
						keptSum -= history[keptFrom]
					}
				}
				tickUnbounded += fixed + historyTotal
				tickTruncated += fixed + keptSum
				for ; i < len(msgs) && msgs[i].Role == llm.RoleAssistant; i++ {
					history = append(history, msgs[i].Tokens)
					historyTotal += msgs[i].Tokens
					keptSum += msgs[i].Tokens
				}
			}
			for ; i < len(msgs); i++ {
				if !msgs[i].Summary {
					history = append(history, msgs[i].Tokens)
					historyTotal += msgs[i].Tokens
					keptSum += msgs[i].Tokens
				}
			}
			unbounded = append(unbounded, tickUnbounded)
			truncated = append(truncated, tickTruncated)
			if len(msgs) > 0 {
				lastID = msgs[len(msgs)-1].ID
			}
			npcd = append(npcd, res.Usage.PromptTokens)
			if len(res.Awaiting) == 0 {
				break
			}
			var results []tick.ToolResult
			for _, id := range res.Awaiting {
				results = append(results, tick.ToolResult{CallID: id, Content: room})
			}
			if err := a.Engine.PostToolResults(ctx, c.ID, results); err != nil {
				return err
			}
		}
		if o.SleepEvery > 0 && (turn+1)%o.SleepEvery == 0 {
			if _, err := a.Engine.Sleep(ctx, c.ID); err != nil {
				return err
			}
		}
		if progress != nil && (turn+1)%100 == 0 {
			fmt.Fprintf(progress, "\rtokens: %d/%d turns", turn+1, o.Turns)
		}
	}
	if progress != nil && o.Turns >= 100 {
		fmt.Fprintln(progress)
	}

	// Reachability at the end of the run: npcd holds a fact when its live
	// history (summary included) or the top 5 of a memory search for the
	// traveler's order holds it; a baseline only by what it still sends.
	live, err := a.Chars.LiveMessages(ctx, c.ID)
	if err != nil {
		return err
	}
	var liveText strings.Builder
	for _, m := range live {
		liveText.WriteString(m.Content)
		liveText.WriteByte('\n')
	}
	all, err := a.Chars.History(ctx, c.ID, character.HistoryQuery{})
	if err != nil {
		return err
	}
	var allText, keptText strings.Builder
	n := 0
	for _, m := range all {
		if m.Summary {
			continue
		}
		allText.WriteString(m.Content)
		allText.WriteByte('\n')
		if n >= keptFrom {
			keptText.WriteString(m.Content)
			keptText.WriteByte('\n')
		}
		n++
	}
	reached := map[string]int{}
	for _, f := range facts {
		if f.in(allText.String()) {
			reached["unbounded"]++
		}
		if f.in(keptText.String()) {
			reached["truncation"]++
		}
		if f.in(liveText.String()) {
			reached["npcd"]++
			continue
		}
		hits, err := a.Retriever.Search(ctx, c.ID, fmt.Sprintf("What did %s order, and for how much?", f.who), 5)
		if err != nil {
			return err
		}
		for _, h := range hits {
			if f.in(h.Content) {
				reached["npcd"]++
				break
			}
		}
	}

	var unboundedTotal int64
	for _, v := range unbounded {
		unboundedTotal += int64(v)
	}
	measure := func(name string, per []int) TokenMeasure {
		m := TokenMeasure{Strategy: name, Ticks: len(per), Facts: len(facts), Reached: reached[name]}
		for _, v := range per {
			m.Total += int64(v)
		}
		if len(per) > 0 {
			m.Mean = int(m.Total / int64(len(per)))
			s := append([]int(nil), per...)
			sort.Ints(s)
			m.P50, m.P95 = s[len(s)/2], s[len(s)*95/100]
		}
		if unboundedTotal > 0 {
			m.Share = float64(int(float64(m.Total)/float64(unboundedTotal)*1000+0.5)) / 1000
		}
		if len(facts) > 0 {
			m.Recall = float64(int(float64(m.Reached)/float64(len(facts))*1000+0.5)) / 1000
		}
		return m
	}
	ms := []TokenMeasure{measure("npcd", npcd), measure("unbounded", unbounded), measure("truncation", truncated)}
	// Every compaction: inside a tick, beside the ticks, or a sleep's.
	recs, err := a.Compactions(ctx, 0)
	if err != nil {
		return err
	}
	ms[0].Compactions, ms[0].SummarizerCalls = len(recs), a.SummarizerCalls()
	ms[0].CompactionsBy = map[string]int{}
	for _, r := range recs {
		ms[0].CompactionsBy[r.Trigger]++
	}
	ms[0].SummarizerPer1000 = per1000(ms[0].SummarizerCalls, ms[0].Ticks)
	if o.JSON {
		enc := json.NewEncoder(out)
		for _, m := range ms {
			if err := enc.Encode(m); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Fprintf(out, "%d turns, builtin model, window %d, a look observation (%d bytes) every third turn, a fact every %d turns, a sleep every %d turns\n",
		o.Turns, o.Window, len(room), o.FactEvery, o.SleepEvery)
	for _, m := range ms {
		fmt.Fprintf(out, "  %-10s prompt tokens per tick mean %6d  p50 %6d  p95 %6d  (%5.1f%% of unbounded)  facts reachable %d/%d (%.1f%%)",
			m.Strategy, m.Mean, m.P50, m.P95, m.Share*100, m.Reached, m.Facts, m.Recall*100)
		if m.Compactions > 0 {
			fmt.Fprintf(out, "  %d compactions (%s), %d summarizer calls (%.1f per 1,000 ticks)", m.Compactions,
				text.Counts(m.CompactionsBy, sleep.Triggers...), m.SummarizerCalls, m.SummarizerPer1000)
		}
		fmt.Fprintln(out)
	}
	return nil
}
