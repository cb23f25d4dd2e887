package scenarios

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary files to the scenario loader, seeded with the
// examples. A file is either refused with a *ValidationError whose every
// problem says what is wrong and where, or it is a scenario that can run:
// it has steps, an NPC with a name and persona, and a model a run accepts.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("examples", "*.yaml"))
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{
		"name: x\nnpc: {id: brom, name: Brom, persona: p}\nsteps:\n  - event: {actor: Bob, text: hi}\n    tick: once\n",
		"name: x\nnpc: {id: brom, name: Brom, persona: p}\nsteps: []\n",
		"name: x\nmodel: gpt-4o\nnpc: {id: brom, name: Brom, persona: p}\nsteps:\n  - advance: 1d\n",
		"steps:\n  - repeat: {count: 3, steps: [{advance: 10m}]}\n", "[", "", "name: &a [*a]\n", "\xff\xfe",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := Parse("fuzz.yaml", data)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Errors) == 0 {
				t.Fatalf("Parse = %v, want a *ValidationError listing problems", err)
			}
			for _, fe := range ve.Errors {
				if fe.Message == "" || fe.File != "fuzz.yaml" || fe.Line < 0 {
					t.Fatalf("problem without a message or place: %+v", fe)
				}
			}
			return
		}
		if len(sc.Steps) == 0 || sc.NPC.Name == "" || sc.NPC.Persona == "" {
			t.Fatalf("accepted a scenario with nothing to run: %d steps, npc %q", len(sc.Steps), sc.NPC.Name)
		}
		if _, err := ModelFor(sc, ""); err != nil {
			t.Fatalf("accepted a scenario no run accepts: %v", err)
		}
	})
}
