// Package wordvec holds offline English word vectors: the 40,000 most
// frequent lowercase dictionary words of GloVe (6B tokens, 100 dimensions,
// Public Domain Dedication and License), centred, with their strongest
// common directions removed, quantized to int8 and embedded in the binary
// (vectors.bin.gz, about 4 MB, made by gen.go; see NOTICE at the
// repository's root for the sources and their licences).
//
// It gives the meaning of single words as far as co-occurrence statistics
// tell it: "kid" is near "child", "pottery" near "ceramics", "sad" near
// "upset". It knows no names, no phrases and no word outside its
// vocabulary, and being trained on encyclopaedia and news text it knows
// related topics rather than exact synonyms ("hot" is near "cold"). Search
// uses it as a weak signal beside keyword matching, never instead of it.
//
// The table is immutable once decoded; it is decoded on first use and
// shared. It must not import any other npcd package; any package may
// import it.
package wordvec
