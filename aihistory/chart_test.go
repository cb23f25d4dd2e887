package aihistory

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npcd/npcd/api"
	"github.com/npcd/npcd/inspect"
	"github.com/npcd/npcd/sleep"
)

// sawtooth is a timeline that climbs to the emergency line and drops back
// after every fifth tick, with one sleep compaction at the end.
func sawtooth() *api.TimelineResponse {
	tl := &api.TimelineResponse{NPC: "brom", Window: 4096, SleepThreshold: 0.7, EmergencyThreshold: 0.8}
	for i := int64(1); i <= 40; i++ {
		u := 0.5 + 0.06*float64((i-1)%5)
		tl.Points = append(tl.Points, inspect.TickPoint{Tick: i, Tokens: int(u * 4096), Window: 4096, Utilization: u})
		if i%5 == 0 {
			tl.Compactions = append(tl.Compactions, inspect.Marker{ID: i / 5, Trigger: sleep.TriggerEmergency, AfterTick: i,
				UtilizationBefore: u, UtilizationAfter: 0.5})
		}
	}
	tl.Compactions = append(tl.Compactions, inspect.Marker{ID: 9, Trigger: sleep.TriggerSleep, AfterTick: 40, UtilizationBefore: 0.74, UtilizationAfter: 0.5})
	return tl
}

func TestChartTextMarksEveryCompaction(t *testing.T) {
	var b bytes.Buffer
	chartText(&b, sawtooth(), 0, 8, 120)
	out := b.String()
	for _, want := range []string{"brom", "80%", "70%", "E emergency ×8", "S sleep ×1"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal chart lacks %q:\n%s", want, out)
		}
	}
	if TriggerLetter(sleep.TriggerEmergency) != 'E' || TriggerLetter(sleep.TriggerSleep) != 'S' {
		t.Errorf("trigger letters E/S: got %c/%c", TriggerLetter(sleep.TriggerEmergency), TriggerLetter(sleep.TriggerSleep))
	}
}

func TestChartFiles(t *testing.T) {
	dir := t.TempDir()
	pngPath, svgPath := filepath.Join(dir, "t.png"), filepath.Join(dir, "t.svg")
	if err := writeChartFile(pngPath, sawtooth(), 0, 0); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the PNG does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() != defaultChartWidth || b.Dy() != defaultChartHeight {
		t.Errorf("PNG is %v, want %dx%d", b, defaultChartWidth, defaultChartHeight)
	}
	if err := writeChartFile(svgPath, sawtooth(), 600, 300); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(data, new(struct{})); err != nil {
		t.Fatalf("the SVG is not XML: %v", err)
	}
	if !strings.Contains(string(data), `width="600"`) {
		t.Errorf("the SVG does not have the asked width")
	}
	for _, bad := range []struct {
		path string
		w, h int
	}{{filepath.Join(dir, "t.gif"), 0, 0}, {pngPath, 100, 100}} {
		if err := writeChartFile(bad.path, sawtooth(), bad.w, bad.h); err == nil {
			t.Errorf("writeChartFile(%s, %dx%d) accepted", bad.path, bad.w, bad.h)
		}
	}
}

// Every compaction trigger has a marker of its own on the chart.
func TestEveryTriggerHasItsOwnMarker(t *testing.T) {
	seen := map[byte]string{}
	for _, trig := range sleep.Triggers {
		s := styleOf(trig)
		if s.letter == '?' {
			t.Errorf("trigger %q has no marker", trig)
		}
		if other, ok := seen[s.letter]; ok {
			t.Errorf("triggers %q and %q share the marker %c", other, trig, s.letter)
		}
		seen[s.letter] = trig
	}
	if styleOf(sleep.TriggerBackground).letter != 'B' {
		t.Errorf("background compactions are marked %c, want B", styleOf(sleep.TriggerBackground).letter)
	}
}
