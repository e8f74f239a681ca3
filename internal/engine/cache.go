package engine

import (
	"sync"
	"time"
)

// resultCache keeps a tool's successful outputs for its cache_ttl_secs, keyed
// by the canonical JSON of the parameters. It holds at most maxEntries.
type resultCache struct {
	ttl        time.Duration
	maxEntries int

	mu      sync.Mutex
	entries map[string]cacheEntry
}

type cacheEntry struct {
	output  any
	expires time.Time
}

func newResultCache(ttl time.Duration) *resultCache {
	return &resultCache{ttl: ttl, maxEntries: 1024, entries: make(map[string]cacheEntry)}
}

func (c *resultCache) get(key string, now time.Time) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	if now.After(e.expires) {
		delete(c.entries, key)
		return nil, false
	}
	return e.output, true
}

func (c *resultCache) put(key string, output any, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.maxEntries {
		c.evict(now)
	}
	c.entries[key] = cacheEntry{output: output, expires: now.Add(c.ttl)}
}

// evict drops expired entries, then the one closest to expiry if still full.
func (c *resultCache) evict(now time.Time) {
	var oldestKey string
	var oldest time.Time
	for k, e := range c.entries {
		if now.After(e.expires) {
			delete(c.entries, k)
			continue
		}
		if oldestKey == "" || e.expires.Before(oldest) {
			oldestKey, oldest = k, e.expires
		}
	}
	if len(c.entries) >= c.maxEntries {
		delete(c.entries, oldestKey)
	}
}
