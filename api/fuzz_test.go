package api

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzDecodeRequests feeds arbitrary bodies to the strict decoder of the
// events and NPC-settings requests. A body is either refused with a
// *requestError that says what is wrong, or it is one valid JSON object
// whose decoded value survives re-encoding and decoding unchanged.
func FuzzDecodeRequests(f *testing.F) {
	for _, s := range []string{
		`{"events": [{"kind": "say", "actor": "alice", "text": "I lost my sword.", "room": "forge"}]}`,
		`{"events": [{"kind": "say", "text": "x", "at": "2026-06-01T08:00:00Z", "self": true}]}`,
		`{"events": [{"kind": "say", "text": "x", "at": 5}]}`,
		`{"events": {"kind": "say"}}`,
		`{"events": [{"kind": "say", "colour": "red"}]}`,
		`{"name": "Brom", "persona": "You are Brom.", "context_window": 4096, "tools": [{"name": "look", "returns": true}]}`,
		`{"name": "Brom", "compaction": {"sleep_threshold": "high"}}`,
		`{"name" "Brom"}`, `{"name": "Brom"} {"x": 1}`, `["Brom"]`, ``, `   `, `{"events": [1e999]}`, "{\"events\":[{\"kind\":\"\xff\"}]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(v any, fresh func() any) {
			err := decodeStrict(body, v, true)
			if err != nil {
				var re *requestError
				if !errors.As(err, &re) || re.Message == "" {
					t.Fatalf("decodeStrict(%q) = %v, want a *requestError with a message", body, err)
				}
				return
			}
			if !json.Valid(body) {
				t.Fatalf("decodeStrict accepted %q, which is not JSON", body)
			}
			again, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("re-encoding %#v: %v", v, err)
			}
			w := fresh()
			if err := decodeStrict(again, w, true); err != nil {
				t.Fatalf("the re-encoded value %s is refused: %v", again, err)
			}
			if !reflect.DeepEqual(v, w) {
				t.Fatalf("round trip changed the value:\n%#v\n%#v", v, w)
			}
		}
		type events struct {
			Events []eventIn `json:"events"`
		}
		check(&events{}, func() any { return &events{} })
		check(&NPCSettings{}, func() any { return &NPCSettings{} })
	})
}
