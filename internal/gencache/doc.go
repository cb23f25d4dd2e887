// Package gencache is a bounded cache in two generations (Cache): entries
// go into the newer generation, and once it holds its bound it becomes the
// older one and the older one is dropped. An entry found only in the older
// generation is put in the newer again by its user, so the entries used
// again and again stay however many others pass through, and the cache
// never holds more than two generations. npcd counts tokens (llm.Counter)
// and keeps compiled tool schemas (tools) in one.
package gencache
