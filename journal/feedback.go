package journal

import (
	"context"
	"math"
	"sort"

	"github.com/npcd/npcd/character"
)

// Pseudo-relevance feedback: the best matches of a query tell what it is
// about in the NPC's own words. "What did she paint?" first finds the lines
// that say "painting"; those name the sunset and the lake, and the lines
// about the sunset and the lake, which never say "paint", come next. The
// keyword channel searches a second time for the most telling words of the
// leading perceived messages, and their hits add, at a lower weight
// (WithFeedback), to the query's own.

// Feedback sizes: how many leading perceived messages lend words, and how
// many words they lend.
const (
	feedbackDocs  = 3
	feedbackWords = 5
)

// feedbackTerms returns up to feedbackWords words of the leading perceived
// messages among ranked, best first by tf·idf summed over those messages:
// words the query lacks, found in at least two of the NPC's items (a word
// of one line says nothing of others), and no one's name (the names a
// query needs are its own; a speaker's name would pull everything they
// said). Those messages are taken from live when it holds them (see
// SearchOptions.Live).
func (r *Retriever) feedbackTerms(ctx context.Context, x *npcIndex, ranked []candidate, terms []string, live []character.Message) ([]string, error) {
	top := make([]candidate, 0, feedbackDocs)
	for _, c := range ranked {
		if len(top) == feedbackDocs {
			break
		}
		if c.kind == kindMessage && x.items[c.p].user {
			top = append(top, c)
		}
	}
	if len(top) == 0 {
		return nil, nil
	}
	rows := make(map[itemKey]*Result, len(top))
	if err := r.store.load(ctx, x.npc, top, &x.rows, live, rows, nil); err != nil {
		return nil, err
	}
	inQuery := make(map[string]bool, len(terms))
	for _, t := range terms {
		inQuery[termKey(t)] = true
	}
	weight := map[string]float64{}
	surface := map[string]string{}
	n := float64(len(x.items))
	for _, c := range top {
		res, ok := rows[itemKey{c.kind, c.id}]
		if !ok {
			continue
		}
		counts, words, _ := indexTerms(ftsWords(res.Content))
		for k, tf := range counts {
			if _, name := x.who[k]; inQuery[k] || name {
				continue
			}
			d := float64(x.list(k).len())
			if d < 2 {
				continue
			}
			weight[k] += float64(tf) * math.Log(1+(n-d+0.5)/(d+0.5))
			surface[k] = words[k]
		}
	}
	keys := make([]string, 0, len(weight))
	for k := range weight {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if weight[keys[i]] != weight[keys[j]] {
			return weight[keys[i]] > weight[keys[j]]
		}
		return keys[i] < keys[j]
	})
	out := make([]string, 0, feedbackWords)
	for _, k := range keys[:min(feedbackWords, len(keys))] {
		out = append(out, surface[k])
	}
	return out, nil
}

// addHits returns the hits of a with those of b added at weight w, b's
// scores scaled so that its best is w times a's best.
func addHits(a, b []kwHit, w float64) []kwHit {
	bestA, bestB := 0.0, 0.0
	for _, h := range a {
		bestA = math.Max(bestA, h.score)
	}
	for _, h := range b {
		bestB = math.Max(bestB, h.score)
	}
	if bestA <= 0 || bestB <= 0 || w <= 0 {
		return a
	}
	out := append(make([]kwHit, 0, len(a)+len(b)), a...)
	at := make(map[itemKey]int, len(a))
	for i, h := range out {
		at[itemKey{h.kind, h.id}] = i
	}
	for _, h := range b {
		s := w * bestA * h.score / bestB
		if i, ok := at[itemKey{h.kind, h.id}]; ok {
			out[i].score += s
		} else {
			out = append(out, kwHit{kind: h.kind, id: h.id, score: s, p: h.p})
		}
	}
	return out
}
