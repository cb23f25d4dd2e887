package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
)

// Report is the outcome of a benchmark run. Its JSON form is
//
//	{"headline": {"questions": …, "recall@5": …, "recall@10": …, "tokens_per_query": …},
//	 "categories": {"1": {"name": "multi-hop", …}, …},
//	 "baseline": {…same shape…}, "conversations": […], …}
type Report struct {
	Window int   `json:"window"`
	Ks     []int `json:"ks"`
	// Ablated is the signal switched off for the run (Options.Ablate).
	Ablated string `json:"ablated,omitempty"`
	Scores
	// Baseline is plain BM25 over the raw turns, when Options.Baseline.
	Baseline      *Scores             `json:"baseline,omitempty"`
	Conversations []ConversationStats `json:"conversations"`
	// Skipped counts questions without evidence, which cannot be scored.
	Skipped int `json:"skipped_questions"`
	// Questions are the outcomes of every question, when Options.Details.
	Questions []QuestionResult `json:"questions,omitempty"`
}

// QuestionResult is how one question scored: its recall per k and the
// event refs each result cited, best first.
type QuestionResult struct {
	QID       string          `json:"qid"`
	Category  int             `json:"category"`
	Question  string          `json:"question"`
	Evidence  []string        `json:"evidence"`
	Recall    map[int]float64 `json:"recall"`
	Tokens    int             `json:"tokens"`
	Retrieved [][]string      `json:"retrieved"`
}

func (o outcome) result(ks []int) QuestionResult {
	r := QuestionResult{QID: o.q.QID, Category: o.q.Category, Question: o.q.Question, Evidence: o.q.Evidence,
		Recall: map[int]float64{}, Tokens: o.tokens, Retrieved: o.refs}
	for i, k := range ks {
		r.Recall[k] = o.recall[i]
	}
	return r
}

// Scores are recall figures over all questions and per category.
type Scores struct {
	// Headline is the micro-average over the questions of categories 1–4.
	Headline Score `json:"headline"`
	// Categories are keyed by category number ("1" … "5").
	Categories map[string]Score `json:"categories"`
}

// Score is recall over a set of questions.
type Score struct {
	Name      string
	Questions int
	// Recall is the mean evidence recall per k.
	Recall map[int]float64
	// TokensPerQuery is the mean token count of the contents returned at
	// the largest k: what a prompt would pay for the recall.
	TokensPerQuery float64
	// Budgeted says whether the next two were scored (Options.Baseline).
	Budgeted bool
	// RecallAtBudget is the mean recall of the leading results that fit in
	// the tokens the baseline returned for the same question, and
	// TokensAtBudget their mean token count.
	RecallAtBudget, TokensAtBudget float64
}

// MarshalJSON writes recall as "recall@k" fields.
func (s Score) MarshalJSON() ([]byte, error) {
	m := map[string]any{"questions": s.Questions, "tokens_per_query": round(s.TokensPerQuery, 1)}
	if s.Name != "" {
		m["name"] = s.Name
	}
	for k, v := range s.Recall {
		m["recall@"+strconv.Itoa(k)] = round(v, 4)
	}
	if s.Budgeted {
		m["recall@budget"] = round(s.RecallAtBudget, 4)
		m["tokens_at_budget"] = round(s.TokensAtBudget, 1)
	}
	return json.Marshal(m)
}

// ConversationStats describe one replayed conversation: how much of it the
// NPC holds live and how often it was compacted.
type ConversationStats struct {
	Conversation     string `json:"conversation"`
	Turns            int    `json:"turns"`
	Questions        int    `json:"questions"`
	Compactions      int    `json:"compactions"`
	LiveMessages     int    `json:"live_messages"`
	ArchivedMessages int    `json:"archived_messages"`
}

func round(v float64, digits int) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', digits, 64), 64)
	return f
}

// summarize averages outcomes per category and over the headline
// categories.
func summarize(os []outcome, ks []int) Scores {
	type acc struct {
		n        int
		recall   []float64
		tokens   int
		budgeted bool
		bRecall  float64
		bTokens  int
	}
	add := func(a *acc, o outcome) {
		if a.recall == nil {
			a.recall = make([]float64, len(ks))
		}
		a.n++
		for i, r := range o.recall {
			a.recall[i] += r
		}
		a.tokens += o.tokens
		if o.budgeted {
			a.budgeted = true
			a.bRecall += o.budgetRecall
			a.bTokens += o.budgetTokens
		}
	}
	finish := func(a acc, name string) Score {
		s := Score{Name: name, Questions: a.n, Recall: map[int]float64{}}
		for i, k := range ks {
			if a.n > 0 {
				s.Recall[k] = a.recall[i] / float64(a.n)
			} else {
				s.Recall[k] = 0
			}
		}
		if a.n > 0 {
			s.TokensPerQuery = float64(a.tokens) / float64(a.n)
			if a.budgeted {
				s.Budgeted = true
				s.RecallAtBudget = a.bRecall / float64(a.n)
				s.TokensAtBudget = float64(a.bTokens) / float64(a.n)
			}
		}
		return s
	}
	var head acc
	cats := map[int]*acc{}
	for _, o := range os {
		c := o.q.Category
		if cats[c] == nil {
			cats[c] = &acc{}
		}
		add(cats[c], o)
		if headline(c) {
			add(&head, o)
		}
	}
	out := Scores{Headline: finish(head, ""), Categories: map[string]Score{}}
	for c, a := range cats {
		out.Categories[strconv.Itoa(c)] = finish(*a, Categories[c])
	}
	return out
}

// WriteTable renders the report as a text table: one row per category, the
// headline last, with the baseline's recall next to the memory search's
// when there is one.
func (r *Report) WriteTable(w io.Writer) {
	if r.Ablated != "" {
		fmt.Fprintf(w, "ablation: %s — %s\n", r.Ablated, Ablations[r.Ablated])
	}
	t := table.NewWriter()
	t.SetOutputMirror(w)
	t.SetStyle(table.StyleLight)
	t.Style().Format.Header = text.FormatDefault
	t.Style().Format.Footer = text.FormatDefault
	header := table.Row{"category", "questions"}
	for _, k := range r.Ks {
		header = append(header, fmt.Sprintf("recall@%d", k))
	}
	header = append(header, "tokens/query")
	if r.Headline.Budgeted {
		header = append(header, "recall@budget", "tokens@budget")
	}
	if r.Baseline != nil {
		for _, k := range r.Ks {
			header = append(header, fmt.Sprintf("bm25 r@%d", k))
		}
		header = append(header, "bm25 tokens")
	}
	t.AppendHeader(header)
	row := func(label string, s Score, b *Score) table.Row {
		out := table.Row{label, s.Questions}
		for _, k := range r.Ks {
			out = append(out, fmt.Sprintf("%.3f", s.Recall[k]))
		}
		out = append(out, fmt.Sprintf("%.1f", s.TokensPerQuery))
		if r.Headline.Budgeted {
			out = append(out, fmt.Sprintf("%.3f", s.RecallAtBudget), fmt.Sprintf("%.1f", s.TokensAtBudget))
		}
		if b != nil {
			for _, k := range r.Ks {
				out = append(out, fmt.Sprintf("%.3f", b.Recall[k]))
			}
			out = append(out, fmt.Sprintf("%.1f", b.TokensPerQuery))
		}
		return out
	}
	var cats []string
	for c := range r.Categories {
		cats = append(cats, c)
	}
	sort.Strings(cats)
	for _, c := range cats {
		s := r.Categories[c]
		var b *Score
		if r.Baseline != nil {
			bs := r.Baseline.Categories[c]
			b = &bs
		}
		t.AppendRow(row(c+" "+s.Name, s, b))
	}
	var hb *Score
	if r.Baseline != nil {
		hb = &r.Baseline.Headline
	}
	t.AppendFooter(row("headline (1–4)", r.Headline, hb))
	cfg := []table.ColumnConfig{}
	for i := 2; i <= len(header); i++ {
		cfg = append(cfg, table.ColumnConfig{Number: i, Align: text.AlignRight, AlignFooter: text.AlignRight})
	}
	t.SetColumnConfigs(cfg)
	t.Render()
}

// WriteAblations renders one line per ablated run next to the full run:
// recall at each k, the change of recall at the largest k, tokens per
// query and recall at the largest k per headline category, so each
// signal's worth reads off one table.
func WriteAblations(w io.Writer, full *Report, ablated []*Report) {
	t := table.NewWriter()
	t.SetOutputMirror(w)
	t.SetStyle(table.StyleLight)
	t.Style().Format.Header = text.FormatDefault
	maxK := full.Ks[len(full.Ks)-1]
	header := table.Row{"signal off"}
	for _, k := range full.Ks {
		header = append(header, fmt.Sprintf("recall@%d", k))
	}
	header = append(header, fmt.Sprintf("Δ recall@%d", maxK), "tokens/query")
	cats := []string{"1", "2", "3", "4"}
	for _, c := range cats {
		header = append(header, fmt.Sprintf("%s @%d", Categories[int(c[0]-'0')], maxK))
	}
	t.AppendHeader(header)
	row := func(label string, r *Report) table.Row {
		out := table.Row{label}
		for _, k := range full.Ks {
			out = append(out, fmt.Sprintf("%.3f", r.Headline.Recall[k]))
		}
		out = append(out, fmt.Sprintf("%+.3f", r.Headline.Recall[maxK]-full.Headline.Recall[maxK]), fmt.Sprintf("%.1f", r.Headline.TokensPerQuery))
		for _, c := range cats {
			out = append(out, fmt.Sprintf("%.3f", r.Categories[c].Recall[maxK]))
		}
		return out
	}
	t.AppendRow(row("(none)", full))
	for _, r := range ablated {
		t.AppendRow(row(r.Ablated, r))
	}
	cfg := []table.ColumnConfig{}
	for i := 2; i <= len(header); i++ {
		cfg = append(cfg, table.ColumnConfig{Number: i, Align: text.AlignRight})
	}
	t.SetColumnConfigs(cfg)
	t.Render()
}
