package bufpool

import "testing"

// TestGetLendsAnEmptyBuffer: a buffer given back with bytes in it comes
// back empty, and a new one has the pool's size.
func TestGetLendsAnEmptyBuffer(t *testing.T) {
	p := New(64, 1024)
	b := p.Get()
	if len(*b) != 0 || cap(*b) != 64 {
		t.Fatalf("new buffer: len %d cap %d, want 0 and 64", len(*b), cap(*b))
	}
	*b = append(*b, "some bytes"...)
	p.Put(b)
	if got := p.Get(); len(*got) != 0 {
		t.Fatalf("a buffer lent again holds %q", *got)
	}
}

// TestPutDropsAnOversizedBuffer: a buffer grown past the bound is not kept,
// so the next one lent is within it.
func TestPutDropsAnOversizedBuffer(t *testing.T) {
	p := New(64, 1024)
	b := p.Get()
	*b = make([]byte, 0, 4096)
	p.Put(b)
	for range 10 {
		got := p.Get()
		if cap(*got) > 1024 {
			t.Fatalf("lent a buffer of capacity %d, past the bound of 1024", cap(*got))
		}
		defer p.Put(got)
	}
}
