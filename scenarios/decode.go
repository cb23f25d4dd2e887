package scenarios

import (
	"fmt"
	"github.com/npcd/npcd/internal/text"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// decoder walks a YAML node tree, collecting every problem with its
// position instead of stopping at the first, so a designer fixes a file
// in one pass.
type decoder struct {
	file string
	errs []*FieldError
	// extensions accepts top-level keys starting with "x-": a place for
	// YAML anchors (long texts used many times), as docker-compose does.
	extensions bool
}

func (d *decoder) errorf(n *yaml.Node, field, format string, args ...any) {
	fe := &FieldError{File: d.file, Field: field, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		fe.Line, fe.Column = n.Line, n.Column
	}
	d.errs = append(d.errs, fe)
}

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func index(field string, i int) string { return fmt.Sprintf("%s[%d]", field, i) }

// describe names what a node is, for "must be X, not Y" messages.
func describe(n *yaml.Node) string {
	n = resolve(n)
	switch {
	case n == nil:
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Tag == "!!null":
		return "empty"
	case n.Tag == "!!str":
		return fmt.Sprintf("the text %q", text.Clip(n.Value, 40))
	}
	return strconv.Quote(text.Clip(n.Value, 40))
}

// object is a decoded mapping: its pairs by key, merge keys (<<) expanded.
type object struct {
	field string
	node  *yaml.Node
	keys  []string
	vals  map[string]*yaml.Node
	knode map[string]*yaml.Node
}

// has reports whether the mapping sets key.
func (o *object) has(key string) bool { _, ok := o.vals[key]; return ok }

// get returns the value of key and its field path.
func (o *object) get(key string) (*yaml.Node, string, bool) {
	v, ok := o.vals[key]
	return v, join(o.field, key), ok
}

// object decodes mapping n, reporting keys outside known (nil accepts any
// key) and keys given twice.
func (d *decoder) object(n *yaml.Node, field string, known []string) (*object, bool) {
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		d.errorf(n, field, "must be a mapping (key: value), not %s", describe(n))
		return nil, false
	}
	o := &object{field: field, node: n, vals: map[string]*yaml.Node{}, knode: map[string]*yaml.Node{}}
	var merged []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, field, "keys must be plain words, not %s", describe(k))
			continue
		}
		if k.Tag == "!!merge" {
			src := resolve(v)
			if src.Kind == yaml.SequenceNode {
				merged = append(merged, src.Content...)
			} else {
				merged = append(merged, src)
			}
			continue
		}
		if _, dup := o.vals[k.Value]; dup {
			d.errorf(k, join(field, k.Value), "is given twice")
			continue
		}
		if known != nil && !slices.Contains(known, k.Value) && !(d.extensions && field == "" && strings.HasPrefix(k.Value, "x-")) {
			d.errorf(k, join(field, k.Value), "unknown field (known here: %s)", strings.Join(known, ", "))
			continue
		}
		o.keys = append(o.keys, k.Value)
		o.vals[k.Value], o.knode[k.Value] = v, k
	}
	// Keys of a merged mapping count where the mapping itself sets none.
	for _, m := range merged {
		mo, ok := d.object(m, field, known)
		if !ok {
			continue
		}
		for _, k := range mo.keys {
			if _, set := o.vals[k]; !set {
				o.keys = append(o.keys, k)
				o.vals[k], o.knode[k] = mo.vals[k], mo.knode[k]
			}
		}
	}
	return o, true
}

// list decodes a sequence.
func (d *decoder) list(n *yaml.Node, field string) ([]*yaml.Node, bool) {
	n = resolve(n)
	if n == nil || n.Kind != yaml.SequenceNode {
		d.errorf(n, field, "must be a list, not %s", describe(n))
		return nil, false
	}
	return n.Content, true
}

func isScalar(n *yaml.Node) bool { return n != nil && n.Kind == yaml.ScalarNode && n.Tag != "!!null" }

// str decodes any scalar as text (a number written where text is expected
// is taken as written).
func (d *decoder) str(n *yaml.Node, field string) (string, bool) {
	n = resolve(n)
	if !isScalar(n) {
		d.errorf(n, field, "must be text, not %s", describe(n))
		return "", false
	}
	return n.Value, true
}

// word decodes a required non-empty text.
func (d *decoder) word(n *yaml.Node, field string) (string, bool) {
	s, ok := d.str(n, field)
	if ok && strings.TrimSpace(s) == "" {
		d.errorf(resolve(n), field, "must not be empty")
		return "", false
	}
	return s, ok
}

func (d *decoder) integer(n *yaml.Node, field string, lo, hi int) (int, bool) {
	n = resolve(n)
	if !isScalar(n) || n.Tag != "!!int" {
		d.errorf(n, field, "must be a whole number, not %s", describe(n))
		return 0, false
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
	if err != nil || v < int64(lo) || v > int64(hi) {
		d.errorf(n, field, "must be between %d and %d, not %s", lo, hi, n.Value)
		return 0, false
	}
	return int(v), true
}

func (d *decoder) number(n *yaml.Node, field string) (float64, bool) {
	n = resolve(n)
	if !isScalar(n) || (n.Tag != "!!int" && n.Tag != "!!float") {
		d.errorf(n, field, "must be a number, not %s", describe(n))
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
	if err != nil {
		d.errorf(n, field, "must be a number, not %s", describe(n))
		return 0, false
	}
	return v, true
}

func (d *decoder) boolean(n *yaml.Node, field string) (bool, bool) {
	n = resolve(n)
	if !isScalar(n) || n.Tag != "!!bool" {
		d.errorf(n, field, "must be true or false, not %s", describe(n))
		return false, false
	}
	return n.Value == "true" || n.Value == "True" || n.Value == "TRUE", true
}

func (d *decoder) duration(n *yaml.Node, field string) (time.Duration, bool) {
	s, ok := d.str(n, field)
	if !ok {
		return 0, false
	}
	v, err := parseDuration(s)
	if err != nil {
		d.errorf(resolve(n), field, "%v", err)
		return 0, false
	}
	return v, true
}

func (d *decoder) regex(n *yaml.Node, field string) (*regexp.Regexp, bool) {
	s, ok := d.str(n, field)
	if !ok {
		return nil, false
	}
	re, err := regexp.Compile(s)
	if err != nil {
		d.errorf(resolve(n), field, "is not a regular expression: %v", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		return nil, false
	}
	return re, true
}

func (d *decoder) text(n *yaml.Node, field string, sc scope) (Text, bool) {
	s, ok := d.str(n, field)
	if !ok {
		return Text{}, false
	}
	t, err := parseText(s, sc)
	if err != nil {
		d.errorf(resolve(n), field, "%v", err)
		return Text{}, false
	}
	return t, true
}

func (d *decoder) stringList(n *yaml.Node, field string) ([]string, bool) {
	items, ok := d.list(n, field)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		s, ok := d.str(it, index(field, i))
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

var durationRe = regexp.MustCompile(`^(\d+d)?((?:\d+(?:\.\d+)?(?:h|m|s|ms))*)$`)

// parseDuration reads a positive game duration: Go's form (90s, 2h30m)
// plus days (3d, 1d12h).
func parseDuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not a duration (like 90s, 45m, 8h, 3d or 1d12h)", s)
	m := durationRe.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil || (m[1] == "" && m[2] == "") {
		return 0, bad
	}
	var total time.Duration
	if m[1] != "" {
		days, err := strconv.Atoi(strings.TrimSuffix(m[1], "d"))
		if err != nil || days > 100000 {
			return 0, bad
		}
		total = time.Duration(days) * 24 * time.Hour
	}
	if m[2] != "" {
		rest, err := time.ParseDuration(m[2])
		if err != nil {
			return 0, bad
		}
		total += rest
	}
	if total <= 0 {
		return 0, fmt.Errorf("%q: a duration must be positive", s)
	}
	return total, nil
}

// toValue converts a node to plain Go values (maps, lists, strings,
// numbers, booleans), as JSON would hold them.
func (d *decoder) toValue(n *yaml.Node, field string) (any, bool) {
	n = resolve(n)
	var v any
	if err := n.Decode(&v); err != nil {
		d.errorf(n, field, "%v", err)
		return nil, false
	}
	return jsonish(v), true
}

// jsonish turns yaml.v3's decoded values into what encoding/json accepts.
func jsonish(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonish(e)
		}
		return x
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = jsonish(e)
		}
		return out
	case []any:
		for i, e := range x {
			x[i] = jsonish(e)
		}
		return x
	case time.Time:
		return x.Format(time.RFC3339)
	}
	return v
}
