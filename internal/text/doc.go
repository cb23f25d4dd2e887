// Package text holds the few string rules every package shares: bounding a
// text to a number of bytes or runes without cutting a UTF-8 character in
// half, folding it onto one line, and listing counts ("2 emergency, 1
// sleep"). One rule, one place, so what the API
// echoes, what a prompt shows and what a report prints are cut alike.
//
// It must not import any other npcd package; any package may import it.
package text
