package aihistory

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"github.com/npcd/npcd/internal/text"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"

	"github.com/npcd/npcd/api"
	"github.com/npcd/npcd/sleep"
)

// Default picture size of a timeline file, in pixels.
const (
	defaultChartWidth  = 1400
	maxAutoChartWidth  = 2400
	defaultChartHeight = 500
)

// triggerStyle is how a compaction trigger is drawn.
type triggerStyle struct {
	letter byte
	color  color.RGBA
}

var triggerStyles = map[string]triggerStyle{
	sleep.TriggerEmergency:  {'E', color.RGBA{0xd6, 0x27, 0x28, 0xff}},
	sleep.TriggerSleep:      {'S', color.RGBA{0x1f, 0x77, 0xb4, 0xff}},
	sleep.TriggerBackground: {'B', color.RGBA{0xff, 0x7f, 0x0e, 0xff}},
	sleep.TriggerManual:     {'M', color.RGBA{0x2c, 0xa0, 0x2c, 0xff}},
	sleep.TriggerOverflow:   {'O', color.RGBA{0x94, 0x67, 0xbd, 0xff}},
	sleep.TriggerClear:      {'C', color.RGBA{0x7f, 0x7f, 0x7f, 0xff}},
}

func styleOf(trigger string) triggerStyle {
	if s, ok := triggerStyles[trigger]; ok {
		return s
	}
	return triggerStyle{'?', color.RGBA{0x33, 0x33, 0x33, 0xff}}
}

// vertex is a point of the utilization line: x in ticks, y a utilization.
type vertex struct{ x, y float64 }

// series is the utilization line of a timeline: one vertex per tick, and
// at each compaction (between tick N and N+1) a vertical drop from its
// utilization before to after, so the sawtooth shows where the context was
// cut and by how much.
func series(tl *api.TimelineResponse) []vertex {
	ms := append([]markerAt(nil), markers(tl)...)
	var out []vertex
	i := 0
	for _, p := range tl.Points {
		for i < len(ms) && ms[i].x < float64(p.Tick) {
			out = append(out, vertex{ms[i].x, ms[i].before}, vertex{ms[i].x, ms[i].after})
			i++
		}
		out = append(out, vertex{float64(p.Tick), p.Utilization})
	}
	for ; i < len(ms); i++ {
		out = append(out, vertex{ms[i].x, ms[i].before}, vertex{ms[i].x, ms[i].after})
	}
	return out
}

// markerAt is a compaction placed on the x axis, half way between the tick
// it followed and the next.
type markerAt struct {
	x             float64
	before, after float64
	trigger       string
	id            int64
	tokensBefore  int
	tokensAfter   int
	afterTick     int64
}

func markers(tl *api.TimelineResponse) []markerAt {
	out := make([]markerAt, 0, len(tl.Compactions))
	for _, c := range tl.Compactions {
		out = append(out, markerAt{x: float64(c.AfterTick) + 0.5, before: c.UtilizationBefore, after: c.UtilizationAfter,
			trigger: c.Trigger, id: c.ID, tokensBefore: c.TokensBefore, tokensAfter: c.TokensAfter, afterTick: c.AfterTick})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].x < out[j].x })
	return out
}

// frame is the geometry shared by the terminal chart and the pictures: the
// x range in ticks and the y range in utilization.
type frame struct {
	x0, x1 float64
	ymax   float64
}

func frameOf(tl *api.TimelineResponse, vs []vertex) frame {
	f := frame{x0: 0, x1: 1, ymax: 1}
	if len(vs) == 0 {
		return f
	}
	f.x0, f.x1 = vs[0].x, vs[0].x
	for _, v := range vs {
		f.x0, f.x1 = math.Min(f.x0, v.x), math.Max(f.x1, v.x)
		f.ymax = math.Max(f.ymax, v.y)
	}
	if f.x1-f.x0 < 1 {
		f.x0, f.x1 = f.x0-0.5, f.x1+0.5
	}
	f.ymax = math.Ceil(f.ymax*10) / 10
	return f
}

func writeChartFile(path string, tl *api.TimelineResponse, width, height int) error {
	if width == 0 {
		// Long runs get wider pictures, so that teeth a dozen ticks apart
		// stay apart.
		width = min(maxAutoChartWidth, max(defaultChartWidth, 2*len(tl.Points)+220))
	}
	if height == 0 {
		height = defaultChartHeight
	}
	if width < 300 || height < 200 || width > 10000 || height > 10000 {
		return fmt.Errorf("aihistory timeline: picture size %dx%d: want 300–10000 by 200–10000 pixels", width, height)
	}
	var draw func(io.Writer, *api.TimelineResponse, int, int) error
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png":
		draw = chartPNG
	case ".svg":
		draw = chartSVG
	default:
		return fmt.Errorf("aihistory timeline: --out %s: the name must end in .png or .svg", path)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	if err := draw(bw, tl, width, height); err != nil {
		f.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// chartText draws the timeline with block characters. Each column covers
// one tick or more: █ spans the utilizations it went through (the drop of a
// compaction included), ░ fills below them, and a dotted line marks each
// threshold. Below the axis a letter marks each column with a compaction:
// E emergency, S sleep, M manual, O overflow, C clear, * several kinds.
func chartText(w io.Writer, tl *api.TimelineResponse, width, height, cols int) {
	if len(tl.Points) == 0 {
		fmt.Fprintf(w, "%s has no recorded ticks yet.\n", tl.NPC)
		return
	}
	if width <= 0 || width > 400 {
		width = cols - 8
	}
	if height <= 0 || height > 100 {
		height = 12
	}
	width = max(20, width)
	vs := series(tl)
	fr := frameOf(tl, vs)
	// Fewer ticks than columns: up to four columns a tick.
	if span := int(fr.x1-fr.x0) + 1; span < width {
		width = span * max(1, min(4, width/span))
	}
	col := func(x float64) int {
		c := int((x - fr.x0) / (fr.x1 - fr.x0) * float64(width-1))
		return max(0, min(width-1, c))
	}
	lo, hi, last := make([]float64, width), make([]float64, width), make([]float64, width)
	have := make([]bool, width)
	for _, v := range vs {
		c := col(v.x)
		if !have[c] {
			lo[c], hi[c], have[c] = v.y, v.y, true
		}
		lo[c], hi[c], last[c] = math.Min(lo[c], v.y), math.Max(hi[c], v.y), v.y
	}
	for c := 1; c < width; c++ { // between recorded ticks nothing changed
		if !have[c] {
			lo[c], hi[c], last[c] = last[c-1], last[c-1], last[c-1]
		}
	}
	marks := []byte(strings.Repeat(" ", width))
	counts := map[string]int{}
	for _, m := range markers(tl) {
		c := col(m.x)
		l := styleOf(m.trigger).letter
		if marks[c] != ' ' && marks[c] != l {
			l = '*'
		}
		marks[c] = l
		counts[m.trigger]++
	}
	cell := fr.ymax / float64(height)
	rowOf := func(u float64) int { return height - 1 - int(u/cell-1e-9) }
	emergencyRow, sleepRow := rowOf(tl.EmergencyThreshold), rowOf(tl.SleepThreshold)
	fmt.Fprintf(w, "%s: context utilization over %d ticks (%d–%d), window %s tokens\n\n", tl.NPC, len(tl.Points),
		tl.Points[0].Tick, tl.Points[len(tl.Points)-1].Tick, text.Thousands(tl.Window))
	for r := 0; r < height; r++ {
		top := fr.ymax - float64(r)*cell
		mid, bottom := top-cell/2, top-cell
		label := ""
		switch r {
		case 0:
			label = fmt.Sprintf("%.0f%%", 100*top)
		case emergencyRow:
			label = fmt.Sprintf("%.0f%%", 100*tl.EmergencyThreshold)
		case sleepRow:
			label = fmt.Sprintf("%.0f%%", 100*tl.SleepThreshold)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%5s ┤", label)
		for c := 0; c < width; c++ {
			upper := lo[c] <= top && hi[c] >= mid
			lower := lo[c] <= mid && hi[c] >= bottom
			switch {
			case upper && lower:
				b.WriteString("█")
			case upper:
				b.WriteString("▀")
			case lower:
				b.WriteString("▄")
			case top <= lo[c]:
				b.WriteString("░")
			case r == emergencyRow:
				b.WriteString("┄")
			case r == sleepRow:
				b.WriteString("·")
			default:
				b.WriteByte(' ')
			}
		}
		fmt.Fprintln(w, b.String())
	}
	fmt.Fprintf(w, "%5s └%s\n", "0%", strings.Repeat("─", width))
	fmt.Fprintf(w, "%5s  %s\n", "", string(marks))
	firstTick, lastTick := fmt.Sprint(tl.Points[0].Tick), fmt.Sprint(tl.Points[len(tl.Points)-1].Tick)
	fmt.Fprintf(w, "%5s  tick %s%s%s\n", "", firstTick, strings.Repeat(" ", max(1, width-len(firstTick)-len(lastTick)-5)), lastTick)
	var legend []string
	for _, t := range sleep.Triggers {
		if counts[t] > 0 {
			legend = append(legend, fmt.Sprintf("%c %s ×%d", styleOf(t).letter, t, counts[t]))
		}
	}
	if len(legend) == 0 {
		legend = append(legend, "no compactions")
	}
	fmt.Fprintf(w, "\n%s · ┄ emergency threshold %.0f%% · ··· sleep threshold %.0f%%\n",
		strings.Join(legend, " · "), 100*tl.EmergencyThreshold, 100*tl.SleepThreshold)
	if per := (fr.x1 - fr.x0 + 1) / float64(width); per > 1.5 {
		fmt.Fprintf(w, "Each column spans about %.0f ticks (█ the range of utilization within it); --from and --to zoom in.\n", per)
	}
	if tl.Truncated {
		fmt.Fprintln(w, "Only the newest ticks are shown; use --from and --to (or --limit) for others.")
	}
}

// plot maps ticks and utilizations to pixels.
type plot struct {
	fr                       frame
	left, top, right, bottom float64
}

func newPlot(fr frame, width, height int) plot {
	return plot{fr: fr, left: 70, top: 56, right: float64(width) - 150, bottom: float64(height) - 80}
}

func (p plot) x(tick float64) float64 {
	return p.left + (tick-p.fr.x0)/(p.fr.x1-p.fr.x0)*(p.right-p.left)
}

func (p plot) y(u float64) float64 {
	return p.bottom - u/p.fr.ymax*(p.bottom-p.top)
}

// xTicks are the tick numbers labelled on the x axis: multiples of 1, 2
// or 5 times a power of ten, about ten of them.
func xTicks(fr frame) []int64 {
	raw := (fr.x1 - fr.x0) / 10
	mag := math.Pow(10, math.Floor(math.Log10(math.Max(raw, 1))))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if mag*m >= raw {
			step = mag * m
			break
		}
	}
	var out []int64
	for t := math.Ceil(fr.x0/step) * step; t <= fr.x1; t += step {
		out = append(out, int64(t))
	}
	return out
}

func chartTitle(tl *api.TimelineResponse) string {
	if len(tl.Points) == 0 {
		return tl.NPC + ": no recorded ticks"
	}
	return fmt.Sprintf("%s: context utilization after each tick, ticks %d–%d (window %s tokens)",
		tl.NPC, tl.Points[0].Tick, tl.Points[len(tl.Points)-1].Tick, text.Thousands(tl.Window))
}

func legendItems(tl *api.TimelineResponse) []string {
	counts := map[string]int{}
	for _, m := range tl.Compactions {
		counts[m.Trigger]++
	}
	var out []string
	for _, t := range sleep.Triggers {
		if counts[t] > 0 {
			out = append(out, t)
		}
	}
	for t := range counts {
		if _, ok := triggerStyles[t]; !ok {
			out = append(out, t)
		}
	}
	return out
}

// chartPNG draws the timeline as a PNG of width×height pixels.
func chartPNG(w io.Writer, tl *api.TimelineResponse, width, height int) error {
	face, err := chartFace(13)
	if err != nil {
		return err
	}
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	fillRect(img, 0, 0, width, height, color.RGBA{0xff, 0xff, 0xff, 0xff})
	vs := series(tl)
	fr := frameOf(tl, vs)
	p := newPlot(fr, width, height)
	grid := color.RGBA{0xe4, 0xe4, 0xe4, 0xff}
	ink := color.RGBA{0x22, 0x22, 0x22, 0xff}
	for u := 0.0; u <= fr.ymax+1e-9; u += 0.1 {
		line(img, p.left, p.y(u), p.right, p.y(u), 1, grid)
		drawText(img, face, fmt.Sprintf("%.0f%%", 100*u), p.left-8, p.y(u)+4, ink, alignRight)
	}
	for _, t := range xTicks(fr) {
		line(img, p.x(float64(t)), p.top, p.x(float64(t)), p.bottom, 1, grid)
		drawText(img, face, fmt.Sprint(t), p.x(float64(t)), p.bottom+18, ink, alignCenter)
	}
	line(img, p.left, p.bottom, p.right, p.bottom, 1, ink)
	line(img, p.left, p.top, p.left, p.bottom, 1, ink)
	drawText(img, face, "tick", (p.left+p.right)/2, p.bottom+36, ink, alignCenter)
	for _, th := range []struct {
		u     float64
		label string
		c     color.RGBA
	}{
		{tl.EmergencyThreshold, "emergency", styleOf(sleep.TriggerEmergency).color},
		{tl.SleepThreshold, "sleep", styleOf(sleep.TriggerSleep).color},
	} {
		dashed(img, p.left, p.y(th.u), p.right, p.y(th.u), th.c)
		drawText(img, face, fmt.Sprintf("%s %.0f%%", th.label, 100*th.u), p.right+8, p.y(th.u)+4, th.c, alignLeft)
	}
	lineColor := color.RGBA{0x30, 0x30, 0x30, 0xff}
	for i := 1; i < len(vs); i++ {
		line(img, p.x(vs[i-1].x), p.y(vs[i-1].y), p.x(vs[i].x), p.y(vs[i].y), 1.5, lineColor)
	}
	for _, m := range markers(tl) {
		c := styleOf(m.trigger).color
		x := p.x(m.x)
		line(img, x, p.y(m.before), x, p.y(m.after), 1.5, c)
		triangle(img, x, p.y(m.before)-3, 4, c)
	}
	title, err := chartFace(16)
	if err != nil {
		return err
	}
	drawText(img, title, chartTitle(tl), p.left, 30, ink, alignLeft)
	lx := p.left
	ly := float64(height) - 18
	for _, t := range legendItems(tl) {
		c := styleOf(t).color
		triangle(img, lx+6, ly-6, 5, c)
		n := 0
		for _, m := range tl.Compactions {
			if m.Trigger == t {
				n++
			}
		}
		label := fmt.Sprintf("%s compaction ×%d", t, n)
		drawText(img, face, label, lx+16, ly, ink, alignLeft)
		lx += 16 + textWidth(face, label) + 24
	}
	line(img, lx, ly-5, lx+22, ly-5, 1.5, lineColor)
	drawText(img, face, "utilization after each tick", lx+28, ly, ink, alignLeft)
	return png.Encode(w, img)
}

// chartSVG draws the timeline as an SVG document of width×height, with one
// element of class "marker" per compaction, titled with what it did.
func chartSVG(w io.Writer, tl *api.TimelineResponse, width, height int) error {
	vs := series(tl)
	fr := frameOf(tl, vs)
	p := newPlot(fr, width, height)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="13">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<title>%s</title>`+"\n", esc(chartTitle(tl)))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	b.WriteString(`<g class="grid" stroke="#e4e4e4">` + "\n")
	for u := 0.0; u <= fr.ymax+1e-9; u += 0.1 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", p.left, p.y(u), p.right, p.y(u))
	}
	for _, t := range xTicks(fr) {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", p.x(float64(t)), p.top, p.x(float64(t)), p.bottom)
	}
	b.WriteString("</g>\n<g class=\"labels\" fill=\"#222222\">\n")
	for u := 0.0; u <= fr.ymax+1e-9; u += 0.1 {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%.0f%%</text>`+"\n", p.left-8, p.y(u)+4, 100*u)
	}
	for _, t := range xTicks(fr) {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", p.x(float64(t)), p.bottom+18, t)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">tick</text>`+"\n", (p.left+p.right)/2, p.bottom+36)
	fmt.Fprintf(&b, `<text x="%.1f" y="28" font-size="15">%s</text>`+"\n", p.left, esc(chartTitle(tl)))
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<path d="M%.1f %.1fV%.1fH%.1f" fill="none" stroke="#222222"/>`+"\n", p.left, p.top, p.bottom, p.right)
	for _, th := range []struct {
		u     float64
		label string
	}{{tl.EmergencyThreshold, sleep.TriggerEmergency}, {tl.SleepThreshold, sleep.TriggerSleep}} {
		c := hex(styleOf(th.label).color)
		fmt.Fprintf(&b, `<line class="threshold" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="6 4"/>`+"\n",
			p.left, p.y(th.u), p.right, p.y(th.u), c)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="%s">%s %.0f%%</text>`+"\n", p.right+8, p.y(th.u)+4, c, th.label, 100*th.u)
	}
	b.WriteString(`<polyline class="utilization" fill="none" stroke="#303030" stroke-width="1.5" points="`)
	for i, v := range vs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", p.x(v.x), p.y(v.y))
	}
	b.WriteString("\"/>\n<g class=\"compactions\">\n")
	for _, m := range markers(tl) {
		c := hex(styleOf(m.trigger).color)
		x, yb, ya := p.x(m.x), p.y(m.before), p.y(m.after)
		fmt.Fprintf(&b, `<g class="marker marker-%s"><title>compaction #%d (%s) after tick %d: %s → %s tokens</title>`,
			esc(m.trigger), m.id, esc(m.trigger), m.afterTick, text.Thousands(m.tokensBefore), text.Thousands(m.tokensAfter))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"/>`, x, yb, x, ya, c)
		fmt.Fprintf(&b, `<path d="M%.1f %.1fl-4 -6.4h8z" fill="%s"/></g>`+"\n", x, yb-3, c)
	}
	b.WriteString("</g>\n<g class=\"legend\">\n")
	lx, ly := p.left, float64(height)-18
	for _, t := range legendItems(tl) {
		n := 0
		for _, m := range tl.Compactions {
			if m.Trigger == t {
				n++
			}
		}
		c := hex(styleOf(t).color)
		label := fmt.Sprintf("%s compaction ×%d", t, n)
		fmt.Fprintf(&b, `<path d="M%.1f %.1fl-5 -8h10z" fill="%s"/><text x="%.1f" y="%.1f" fill="#222222">%s</text>`+"\n",
			lx+6, ly, c, lx+16, ly, esc(label))
		lx += 16 + float64(len(label))*7 + 24
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#303030" stroke-width="1.5"/><text x="%.1f" y="%.1f" fill="#222222">utilization after each tick</text>`+"\n",
		lx, ly-5, lx+22, ly-5, lx+28, ly)
	b.WriteString("</g>\n</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

func hex(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

// Raster drawing for chartPNG.

func chartFace(size float64) (font.Face, error) {
	f, err := opentype.Parse(goregular.TTF)
	if err != nil {
		return nil, fmt.Errorf("chart font: %w", err)
	}
	return opentype.NewFace(f, &opentype.FaceOptions{Size: size, DPI: 72, Hinting: font.HintingFull})
}

type align int

const (
	alignLeft align = iota
	alignCenter
	alignRight
)

func textWidth(face font.Face, s string) float64 {
	return float64(font.MeasureString(face, s)) / 64
}

func drawText(img *image.RGBA, face font.Face, s string, x, y float64, c color.Color, a align) {
	switch a {
	case alignCenter:
		x -= textWidth(face, s) / 2
	case alignRight:
		x -= textWidth(face, s)
	}
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: face, Dot: fixed.Point26_6{X: fixed.Int26_6(x * 64), Y: fixed.Int26_6(y * 64)}}
	d.DrawString(s)
}

func fillRect(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

// line draws a segment of the given width by stamping squares along it.
func line(img *image.RGBA, x0, y0, x1, y1, width float64, c color.RGBA) {
	n := int(math.Max(math.Abs(x1-x0), math.Abs(y1-y0))*2) + 1
	r := width / 2
	for i := 0; i <= n; i++ {
		t := float64(i) / float64(n)
		x, y := x0+(x1-x0)*t, y0+(y1-y0)*t
		for yy := int(math.Floor(y - r + 0.5)); yy <= int(math.Floor(y+r-0.5)); yy++ {
			for xx := int(math.Floor(x - r + 0.5)); xx <= int(math.Floor(x+r-0.5)); xx++ {
				if image.Pt(xx, yy).In(img.Rect) {
					img.SetRGBA(xx, yy, c)
				}
			}
		}
	}
}

func dashed(img *image.RGBA, x0, y0, x1, y1 float64, c color.RGBA) {
	length := math.Hypot(x1-x0, y1-y0)
	for d := 0.0; d < length; d += 10 {
		e := math.Min(d+6, length)
		line(img, x0+(x1-x0)*d/length, y0+(y1-y0)*d/length, x0+(x1-x0)*e/length, y0+(y1-y0)*e/length, 1, c)
	}
}

// triangle fills a downward triangle whose tip is at (x, y).
func triangle(img *image.RGBA, x, y, half float64, c color.RGBA) {
	h := half * 1.6
	for yy := int(y - h); yy <= int(y); yy++ {
		w := half * (y - float64(yy)) / h
		for xx := int(math.Round(x - w)); xx <= int(math.Round(x+w)); xx++ {
			if image.Pt(xx, yy).In(img.Rect) {
				img.SetRGBA(xx, yy, c)
			}
		}
	}
}
