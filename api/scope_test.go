package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"
)

// A batch tick with a scope and no npcs ticks only that scope's pending
// NPCs; the feed narrows to a scope; a scope with npcs or a bad scope is
// refused.
func TestScopes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	for id, scope := range map[string]string{"brom": "oakvale", "mira": "oakvale", "olaf": "frosthold"} {
		s := NPCSettings{Name: strings.ToUpper(id[:1]) + id[1:], Persona: "You are a villager.", Scope: scope}
		if got := e.put(id, s); got.Scope != scope {
			t.Fatalf("scope of %s = %q, want %q", id, got.Scope, scope)
		}
	}
	for _, id := range []string{"brom", "mira", "olaf"} {
		e.say(id, id+"-1", "Hello!")
	}
	r := e.do("POST", "/v1/tick", `{"scope": "oakvale"}`)
	var out BatchTickResponse
	if err := json.Unmarshal(r.body, &out); err != nil || r.status != http.StatusOK {
		t.Fatalf("scoped batch = %d %s", r.status, r.body)
	}
	var ticked []string
	for _, res := range out.Results {
		ticked = append(ticked, res.NPC)
	}
	sort.Strings(ticked)
	if strings.Join(ticked, ",") != "brom,mira" || len(out.Errors) != 0 {
		t.Fatalf("scoped batch ticked %v (errors %v), want brom and mira only", ticked, out.Errors)
	}
	if n, err := e.chars.PendingCount(t.Context(), "olaf"); err != nil || n != 1 {
		t.Errorf("olaf's pending events = %d, %v; want his event kept for his own scope", n, err)
	}
	// olaf moves to oakvale with a patch; the feed of oakvale then has him too.
	if r := e.do("PATCH", "/v1/npcs/olaf", `{"scope": "oakvale"}`); r.status != http.StatusOK {
		t.Fatalf("patch scope = %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/v1/tick", `{"scope": "frosthold"}`); r.status != http.StatusOK || !strings.Contains(string(r.body), `"results":[]`) {
		t.Errorf("batch of an empty scope = %d %s, want no results (not every pending npc)", r.status, r.body)
	}
	e.do("POST", "/v1/tick", `{"npcs": ["olaf"]}`)
	r = e.do("GET", "/v1/actions?scope=oakvale&npc=mira,olaf", "")
	var feed Feed
	if err := json.Unmarshal(r.body, &feed); err != nil || r.status != http.StatusOK {
		t.Fatalf("scoped feed = %d %s", r.status, r.body)
	}
	var got []string
	for _, ft := range feed.Ticks {
		got = append(got, ft.NPC)
	}
	if strings.Join(got, ",") != "mira,olaf" {
		t.Errorf("feed of oakvale for mira,olaf = %v", got)
	}
	for _, tc := range []struct{ method, path, body, field string }{
		{"POST", "/v1/tick", `{"scope": "oakvale", "npcs": ["brom"]}`, "scope"},
		{"POST", "/v1/tick", `{"scope": "Oak Vale"}`, "scope"},
		{"GET", "/v1/actions?scope=Oak!", "", "scope"},
		{"PATCH", "/v1/npcs/brom", `{"scope": "Oak Vale"}`, "scope"},
		{"PATCH", "/v1/npcs/brom", `{"auto_tick": {"enabled": true, "debounce_ms": 100, "max_wait_ms": 50}}`, "auto_tick.max_wait_ms"},
	} {
		r := e.do(tc.method, tc.path, tc.body)
		if r.status != http.StatusBadRequest || !strings.Contains(errorOf(t, r).Message, tc.field) {
			t.Errorf("%s %s %s = %d %s, want 400 naming %s", tc.method, tc.path, tc.body, r.status, r.body, tc.field)
		}
	}
}

// With Accept: application/x-ndjson a batch tick streams one line per NPC:
// a result or an error, malformed ids included.
func TestBatchTickNDJSON(t *testing.T) {
	t.Parallel()
	e := bromAndMiraWaiting(t)
	r := e.do("POST", "/v1/tick", `{"npcs": ["brom", "Bad!", "ghost", "mira"]}`, "Accept", "application/x-ndjson")
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("ndjson batch = %d %q %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	results, errs := map[string]bool{}, map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	lines := 0
	for sc.Scan() {
		lines++
		var l BatchLine
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil || (l.Result == nil) == (l.Error == nil) {
			t.Fatalf("line %q: %v; want exactly one of result and error", sc.Text(), err)
		}
		if l.Result != nil {
			results[l.Result.NPC] = !l.Result.Idle
		} else {
			errs[l.Error.NPC] = l.Error.Code
		}
	}
	if lines != 4 || !results["brom"] || !results["mira"] || errs["Bad!"] != CodeBadRequest || errs["ghost"] != CodeNotFound {
		t.Errorf("lines = %d, results %v, errors %v; want brom and mira ticked, Bad! bad_request, ghost not_found", lines, results, errs)
	}
	// A refusal of the whole batch keeps its JSON error.
	r = e.do("POST", "/v1/tick", `{"npcs": ["brom", "brom"]}`, "Accept", "application/x-ndjson")
	if r.status != http.StatusBadRequest || errorOf(t, r).Code != CodeBadRequest {
		t.Errorf("duplicate ids with ndjson = %d %s, want a 400 JSON error", r.status, r.body)
	}
}
