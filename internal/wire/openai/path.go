package openai

import "strconv"

// fpath is a request field path (param) built lazily: a chain of nodes
// from the leaf to the root, rendered by String only when an error is
// reported, so that parsing a valid request builds no path strings. The nil
// *fpath is the empty path. Nodes live on the stack of the functions that
// create them (join, index and root inline); no function may keep one after
// it returns.
type fpath struct {
	parent  *fpath
	key     string
	index   int
	isIndex bool
}

// String renders the path as indexParam and string concatenation did:
// "messages[3].tool_calls[0].function.name".
func (p *fpath) String() string {
	var buf [64]byte
	return string(p.appendTo(buf[:0]))
}

// appendTo renders the path into b, which must be empty on the outermost
// call. It copies the keys' bytes, so no node escapes through the result.
func (p *fpath) appendTo(b []byte) []byte {
	if p == nil {
		return b
	}
	b = p.parent.appendTo(b)
	if p.isIndex {
		b = append(b, '[')
		b = strconv.AppendInt(b, int64(p.index), 10)
		return append(b, ']')
	}
	if p.parent != nil {
		b = append(b, '.')
	}
	return append(b, p.key...)
}

// root is the path of a top-level member.
func root(key string) *fpath { return &fpath{key: key} }

// join is the path of member key (which may hold dots: "function.name") of p.
func join(p *fpath, key string) *fpath { return &fpath{parent: p, key: key} }

// index is the path of element i of p.
func index(p *fpath, i int) *fpath { return &fpath{parent: p, index: i, isIndex: true} }
