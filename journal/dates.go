package journal

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// GroundDates writes, after each relative time expression of text
// ("yesterday", "last Friday", "two weeks ago", "next month"…), the absolute
// date it means on the game's clock, in square brackets: "I saw her
// yesterday [7 May 2023]". A line that starts with a time stamp
// ("[2023-05-08 13:56] …") is read against that stamp, any other against at.
// Expressions already followed by a bracketed date are left alone, so text
// can be grounded again without change. English only; expressions too
// vague to date ("recently", "a few days ago", a bare weekday) are kept as
// they are.
//
// The date is written into the text, not beside it in a column, so that
// keyword search, vector search and whoever reads a result all see it:
// "when did she leave?" is answered by "left last Friday [19 May 2023]".
func GroundDates(text string, at time.Time) string {
	if text == "" || !mayBeRelative(text) {
		return text
	}
	lines := strings.SplitAfter(text, "\n")
	for i, line := range lines {
		anchor := at
		if m := lineStamp.FindStringSubmatch(line); m != nil {
			if t, err := time.ParseInLocation("2006-01-02 15:04", m[1]+" "+m[2], time.UTC); err == nil {
				anchor = t
			}
		}
		if anchor.IsZero() {
			continue
		}
		lines[i] = groundLine(line, anchor)
	}
	return strings.Join(lines, "")
}

// lineStamp is the game-time stamp at the head of a perceived line.
var lineStamp = regexp.MustCompile(`^\[(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2})(?::\d{2})?\]`)

// hintWords are the words relativeHint looks for.
var hintWords = []string{"yesterday", "today", "tonight", "tomorrow", "last", "next", "this", "day", "days", "week", "weeks", "month", "months", "year", "years"}

// relativeHint is a cheap test for text that may hold an expression: one
// of hintWords, as a whole word, in any case.
var relativeHint = regexp.MustCompile(`(?i)\b(` + strings.Join(hintWords, "|") + `)\b`)

// mayBeRelative is relativeHint.MatchString(text) without the regular
// expression for ASCII text: the pattern matches a whole word (a run of
// ASCII letters, digits and underscores, as \b reads them) that is one of
// hintWords in any case. Other text, where case folding reaches beyond
// ASCII (ſ, the Kelvin sign), goes to the pattern.
func mayBeRelative(text string) bool {
	for i := 0; i < len(text); i++ {
		if text[i] >= 0x80 {
			return relativeHint.MatchString(text)
		}
	}
	for i := 0; i < len(text); {
		if !wordByte(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && wordByte(text[j]) {
			j++
		}
		if w := text[i:j]; 3 <= len(w) && len(w) <= 9 {
			for _, h := range hintWords {
				if strings.EqualFold(w, h) {
					return true
				}
			}
		}
		i = j
	}
	return false
}

// wordByte reports whether b is an ASCII word character (\w).
func wordByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '_'
}

const (
	numberWord = `(?:\d{1,2}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a couple of|couple of)`
	weekday    = `(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)`
	timeUnit   = `(?:day|week|month|year)s?`
)

// relativeRe matches the expressions GroundDates resolves; the longest
// alternatives come first.
var relativeRe = regexp.MustCompile(`(?i)\b(?:` +
	`the day before yesterday|the day after tomorrow|` +
	numberWord + ` ` + timeUnit + ` (?:ago|from now)|in ` + numberWord + ` ` + timeUnit + `|` +
	`(?:last|this|next) (?:week|weekend|month|year)|` +
	`(?:last|next|this(?: past| coming)?) ` + weekday + `|` +
	`this (?:morning|afternoon|evening)|last night|` +
	`yesterday|today|tonight|tomorrow` +
	`)\b`)

// alreadyDated matches the bracketed date GroundDates writes, at the head
// of what follows an expression.
var alreadyDated = regexp.MustCompile(`^ \[[^\]\n]{4,40}\]`)

func groundLine(line string, at time.Time) string {
	ms := relativeRe.FindAllStringIndex(line, -1)
	if ms == nil {
		return line
	}
	var b strings.Builder
	last := 0
	for _, m := range ms {
		b.WriteString(line[last:m[1]])
		last = m[1]
		if alreadyDated.MatchString(line[m[1]:]) || afterThe(line[:m[0]]) {
			continue
		}
		if d := resolveRelative(strings.ToLower(line[m[0]:m[1]]), at); d != "" {
			b.WriteString(" [" + d + "]")
		}
	}
	b.WriteString(line[last:])
	return b.String()
}

// afterThe reports whether an expression follows "the": "the last year"
// and "the next week" are spans of a story ("over the last year"), not
// dates.
func afterThe(before string) bool {
	before = strings.ToLower(strings.TrimRight(before, " "))
	return strings.HasSuffix(before, " the") || before == "the"
}

// resolveRelative returns the absolute date an expression means at time
// at: a day ("7 May 2023"), a week ("week of 1 May 2023", starting on
// Monday), a weekend ("weekend of 6 May 2023", its Saturday), a month
// ("April 2023") or a year ("2022"); "" when it cannot say.
func resolveRelative(expr string, at time.Time) string {
	day := time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
	f := strings.Fields(expr)
	switch expr {
	case "today", "tonight", "this morning", "this afternoon", "this evening":
		return fmtDay(day)
	case "yesterday", "last night":
		return fmtDay(day.AddDate(0, 0, -1))
	case "tomorrow":
		return fmtDay(day.AddDate(0, 0, 1))
	case "the day before yesterday":
		return fmtDay(day.AddDate(0, 0, -2))
	case "the day after tomorrow":
		return fmtDay(day.AddDate(0, 0, 2))
	}
	switch {
	case len(f) == 2 && (f[0] == "last" || f[0] == "this" || f[0] == "next") && !isWeekday(f[1]):
		step := map[string]int{"last": -1, "this": 0, "next": 1}[f[0]]
		switch f[1] {
		case "week":
			return fmtWeek(monday(day).AddDate(0, 0, 7*step))
		case "weekend":
			return fmtWeekend(day, step)
		case "month":
			return fmtMonth(time.Date(day.Year(), day.Month()+time.Month(step), 1, 0, 0, 0, 0, time.UTC))
		case "year":
			return strconv.Itoa(day.Year() + step)
		}
	case isWeekday(f[len(f)-1]):
		wd := weekdays[f[len(f)-1]]
		if f[0] == "next" || f[0] == "this" && len(f) == 3 && f[1] == "coming" {
			d := (int(wd) - int(day.Weekday()) + 7) % 7
			if d == 0 {
				d = 7
			}
			return fmtDay(day.AddDate(0, 0, d))
		}
		if f[0] == "this" && len(f) == 2 { // the one of the current week
			return fmtDay(monday(day).AddDate(0, 0, (int(wd)+6)%7))
		}
		d := (int(day.Weekday()) - int(wd) + 7) % 7 // last, this past
		if d == 0 {
			d = 7
		}
		return fmtDay(day.AddDate(0, 0, -d))
	}
	// "N units ago", "N units from now", "in N units".
	sign := -1
	if f[0] == "in" {
		sign, f = 1, f[1:]
	} else if f[len(f)-1] == "now" {
		sign = 1
	}
	n, rest := countOf(f)
	if n == 0 || len(rest) == 0 {
		return ""
	}
	n *= sign
	switch strings.TrimSuffix(rest[0], "s") {
	case "day":
		return fmtDay(day.AddDate(0, 0, n))
	case "week":
		return fmtWeek(monday(day.AddDate(0, 0, 7*n)))
	case "month":
		return fmtMonth(time.Date(day.Year(), day.Month()+time.Month(n), 1, 0, 0, 0, 0, time.UTC))
	case "year":
		return strconv.Itoa(day.Year() + n)
	}
	return ""
}

var weekdays = map[string]time.Weekday{"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday,
	"wednesday": time.Wednesday, "thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday}

func isWeekday(w string) bool { _, ok := weekdays[w]; return ok }

var numbers = map[string]int{"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
	"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}

// countOf reads the number at the head of f ("two", "12", "a couple of")
// and returns it with the words after it.
func countOf(f []string) (int, []string) {
	if len(f) >= 3 && f[0] == "a" && f[1] == "couple" {
		return 2, f[3:]
	}
	if len(f) >= 2 && f[0] == "couple" {
		return 2, f[2:]
	}
	if n, ok := numbers[f[0]]; ok {
		return n, f[1:]
	}
	if n, err := strconv.Atoi(f[0]); err == nil && n > 0 {
		return n, f[1:]
	}
	return 0, nil
}

func monday(day time.Time) time.Time {
	return day.AddDate(0, 0, -((int(day.Weekday()) + 6) % 7))
}

// fmtWeekend names the weekend step weekends from the one around day by
// its Saturday. On a Saturday or Sunday "this weekend" is the current one
// and "last weekend" the one before; on a weekday "last weekend" is the
// one just past and "this" or "next" the one to come.
func fmtWeekend(day time.Time, step int) string {
	sat := monday(day).AddDate(0, 0, 5) // this week's Saturday
	weekend := day.Weekday() == time.Saturday || day.Weekday() == time.Sunday
	switch {
	case step < 0:
		sat = sat.AddDate(0, 0, -7)
	case step > 0 && weekend:
		sat = sat.AddDate(0, 0, 7)
	}
	return "weekend of " + fmtDay(sat)
}

func fmtDay(t time.Time) string   { return t.Format("2 January 2006") }
func fmtWeek(t time.Time) string  { return "week of " + fmtDay(t) }
func fmtMonth(t time.Time) string { return t.Format("January 2006") }
