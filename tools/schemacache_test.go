package tools

import (
	"fmt"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/gencache"
)

// NPCs that declare the same tool share one compiled schema, which
// validates calls of many NPCs at once; a tool of the same name with
// another schema gets its own, and a schema that does not compile is
// refused every time.
func TestCompiledSchemasAreShared(t *testing.T) {
	spec := func(maxCount int) character.ToolSpec {
		return character.ToolSpec{Name: "give", Parameters: map[string]any{
			"type":       "object",
			"properties": map[string]any{"count": map[string]any{"type": "integer", "maximum": maxCount}},
			"required":   []any{"count"},
		}}
	}
	internal := NewInternals(nil, nil).Tools()
	sets := make([]*Set, 8)
	for i := range sets {
		s, err := Compile([]character.ToolSpec{spec(5)}, internal)
		if err != nil {
			t.Fatal(err)
		}
		sets[i] = s
	}
	for _, name := range sets[0].Names() {
		a, _ := sets[0].Lookup(name)
		b, _ := sets[7].Lookup(name)
		if a.schema != b.schema {
			t.Errorf("tool %s: two NPCs declaring it hold two compiled schemas", name)
		}
	}
	other, err := Compile([]character.ToolSpec{spec(9)}, internal)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := sets[0].Lookup("give")
	b, _ := other.Lookup("give")
	if a.schema == b.schema {
		t.Fatal("a tool declared with another schema shares the first one's")
	}
	if _, err := other.Validate("give", `{"count": 7}`); err != nil {
		t.Fatalf("a count of 7 under the other schema's maximum of 9: %v", err)
	}
	if _, err := sets[0].Validate("give", `{"count": 7}`); err == nil {
		t.Fatal("a count of 7 passed the first schema's maximum of 5")
	}
	bad := character.ToolSpec{Name: "give", Parameters: map[string]any{"type": "object", "properties": 3}}
	for range 2 {
		if _, err := Compile([]character.ToolSpec{bad}, internal); err == nil {
			t.Fatal("a schema whose properties are not an object compiled")
		}
	}
	var wg sync.WaitGroup
	for i, s := range sets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 50 {
				_, err := s.Validate("give", fmt.Sprintf(`{"count": %d}`, (i+n)%8))
				if over := (i+n)%8 > 5; (err != nil) != over {
					t.Errorf("count %d: error %v", (i+n)%8, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// The cache keeps a schema looked up again and again while many others
// pass through, and holds at most two generations.
func TestSchemaCacheKeepsRecurringSchemas(t *testing.T) {
	c := schemaCache{schemas: gencache.New[string, *jsonschema.Schema](schemaEntries)}
	s, err := compileNew("look", []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	c.put("look", s)
	for i := range 3 * schemaEntries {
		c.put(fmt.Sprintf("tool%d", i), s)
		if i%100 == 0 {
			if got, ok := c.get("look"); !ok || got != s {
				t.Fatalf("after %d other schemas the recurring one is gone", i+1)
			}
		}
		if n, o := c.schemas.Len(); n > schemaEntries || o > schemaEntries {
			t.Fatalf("%d + %d schemas held, over two generations of %d", n, o, schemaEntries)
		}
	}
	if _, ok := c.get("tool0"); ok {
		t.Fatal("a schema put once, long ago, is still held")
	}
}
