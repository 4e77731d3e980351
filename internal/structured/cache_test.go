package structured

// len reports the cached entries and their bytes.
func (c *compileCache) len() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}
