package inspect

import (
	"context"
	"time"
)

// Timeline is an NPC's context utilization over its recorded ticks, with a
// marker for every compaction in the range: the data of the sawtooth chart.
type Timeline struct {
	Points      []TickPoint `json:"points"`
	Compactions []Marker    `json:"compactions"`
	// Truncated is set when the range held more ticks than the limit; the
	// newest are kept.
	Truncated bool `json:"truncated"`
}

// TickPoint is one recorded tick: the context after its commit.
type TickPoint struct {
	Tick        int64     `json:"tick"`
	At          time.Time `json:"at"`
	GameTime    time.Time `json:"game_time"`
	Tokens      int       `json:"tokens"`
	Window      int       `json:"window"`
	Utilization float64   `json:"utilization"`
	// CompactionID is the compaction that ran inside the tick (emergency
	// or overflow), if any.
	CompactionID *int64 `json:"compaction_id"`
}

// Marker is one compaction on the timeline. It ran after tick AfterTick had
// committed and before the next tick's model call: between ticks for a
// sleep, manual or clear compaction, at the start of tick AfterTick+1 for an
// emergency or overflow one.
type Marker struct {
	ID                int64     `json:"id"`
	Trigger           string    `json:"trigger"`
	AfterTick         int64     `json:"after_tick"`
	At                time.Time `json:"at"`
	TokensBefore      int       `json:"tokens_before"`
	TokensAfter       int       `json:"tokens_after"`
	UtilizationBefore float64   `json:"utilization_before"`
	UtilizationAfter  float64   `json:"utilization_after"`
	Summarizer        string    `json:"summarizer"`
	MessagesCompacted int       `json:"messages_compacted"`
}

// TimelineQuery selects the ticks of a timeline.
type TimelineQuery struct {
	From, To int64 // tick range, inclusive; 0 for no bound
	Limit    int   // the newest Limit ticks of the range; 0 for all
}

// Timeline returns the timeline of NPC npc over the ticks tq selects.
// Compaction markers cover the same range of ticks.
func (in *Inspector) Timeline(ctx context.Context, npc string, tq TimelineQuery) (*Timeline, error) {
	c, err := in.chars.Get(ctx, npc)
	if err != nil {
		return nil, err
	}
	newest := 0
	if tq.Limit > 0 {
		newest = tq.Limit + 1
	}
	recs, err := in.chars.TickRange(ctx, npc, tq.From, tq.To, newest)
	if err != nil {
		return nil, err
	}
	t := &Timeline{Points: []TickPoint{}, Compactions: []Marker{}}
	if tq.Limit > 0 {
		if len(recs) > tq.Limit {
			recs, t.Truncated = recs[:tq.Limit], true
		}
		for i, j := 0, len(recs)-1; i < j; i, j = i+1, j-1 {
			recs[i], recs[j] = recs[j], recs[i]
		}
	}
	windowAt := map[int64]int{}
	for _, r := range recs {
		t.Points = append(t.Points, TickPoint{Tick: r.Tick, At: r.At, GameTime: r.GameTime, Tokens: r.ContextTokens,
			Window: r.Window, Utilization: r.Utilization, CompactionID: r.CompactionID})
		windowAt[r.Tick] = r.Window
	}
	if len(recs) == 0 {
		return t, nil
	}
	// A compaction after tick N belongs to the range when N+1 is in it, or
	// N is its last tick.
	lo, hi := recs[0].Tick-1, recs[len(recs)-1].Tick
	_, all, err := in.allCompactions(ctx, npc)
	if err != nil {
		return nil, err
	}
	for _, r := range all {
		if r.Tick < lo || r.Tick > hi {
			continue
		}
		w := windowAt[r.Tick]
		if w == 0 {
			w = windowAt[r.Tick+1]
		}
		if w == 0 {
			w = c.ContextWindow
		}
		t.Compactions = append(t.Compactions, Marker{ID: r.ID, Trigger: r.Trigger, AfterTick: r.Tick, At: r.CreatedAt,
			TokensBefore: r.TokensBefore, TokensAfter: r.TokensAfter, UtilizationBefore: ratio(r.TokensBefore, w),
			UtilizationAfter: ratio(r.TokensAfter, w), Summarizer: r.Summarizer, MessagesCompacted: r.MessagesCompacted})
	}
	return t, nil
}

func ratio(n, w int) float64 {
	if w <= 0 {
		return 0
	}
	return float64(int(float64(n)/float64(w)*1000+0.5)) / 1000
}
