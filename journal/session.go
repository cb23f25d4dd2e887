package journal

// Session context: what was said on the same occasion as the best matches
// is likely part of the same story. A conversation runs over one sitting,
// and a question about it is often answered by a turn that shares few
// words with the question but sits in the session its best matches come
// from: "when did she leave?" matches the turn naming the leaving, and the
// date is in the reply two turns later, or in the greeting that opened the
// session. The session is the game day of an item (its game time, in whole
// days), so the signal needs no session boundaries from the game.

// sessionTop is how many of the leading perceived messages say which game
// days the query is about.
const sessionTop = 5

// secondsPerDay is the length of the game day sessions are counted in.
const secondsPerDay = 24 * 60 * 60

// gameDay is the game day of a unix time.
func gameDay(t int64) int64 {
	d := t / secondsPerDay
	if t < 0 && t%secondsPerDay != 0 {
		d--
	}
	return d
}

// sessionContext raises the score of each candidate by w times the share,
// among the sessionTop best-scoring perceived messages, of the score of
// those on the same game day as the candidate: a candidate on a day none
// of them is on keeps its score, one on the day of all of them gains w of
// it. When every match is on one day, every candidate on it gains alike
// and the order does not change. It records the gain in the candidates'
// parts.
func (x *npcIndex) sessionContext(cs []candidate, w float64) {
	if w <= 0 || len(cs) < 2 {
		return
	}
	var top [sessionTop]int // positions in cs, best first
	n := 0
	for i, c := range cs {
		if c.score <= 0 || c.kind != kindMessage || !x.items[c.p].user {
			continue
		}
		j := n
		if n < sessionTop {
			n++
		} else if c.score <= cs[top[n-1]].score {
			continue
		} else {
			j = n - 1
		}
		for ; j > 0 && cs[top[j-1]].score < c.score; j-- {
			top[j] = top[j-1]
		}
		top[j] = i
	}
	if n < 2 {
		return
	}
	// The game days of the best matches and the score each day holds, in
	// the order the days first appear among them.
	var days [sessionTop]int64
	var mass [sessionTop]float64
	nd := 0
	total := 0.0
	for _, i := range top[:n] {
		c := cs[i]
		d := gameDay(x.items[c.p].gameTime)
		j := 0
		for j < nd && days[j] != d {
			j++
		}
		if j == nd {
			days[j], mass[j] = d, 0
			nd++
		}
		mass[j] += c.score
		total += c.score
	}
	for i := range cs {
		c := &cs[i]
		if c.score <= 0 {
			continue
		}
		d := gameDay(x.items[c.p].gameTime)
		m := 0.0
		for j := range nd {
			if days[j] == d {
				m = mass[j]
				break
			}
		}
		share := m / total
		if share <= 0 {
			continue
		}
		c.parts.session = w * share
		c.score *= 1 + w*share
	}
}
