package engine

import "strconv"

// SimilarityHeader is X-Mesh-Cache-Similarity's value for a semantic hit
// (the cosine similarity to 4 decimals), "" for any other call.
func SimilarityHeader(rec *Record) string {
	if rec.SemanticCache != SemanticHit {
		return ""
	}
	return strconv.FormatFloat(rec.CacheSimilarity, 'f', 4, 64)
}
