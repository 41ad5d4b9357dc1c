package volumeserver

import (
	"bytes"
	"testing"

	"github.com/kelpfs/kelp/internal/erasure"
)

func TestBlockCache(t *testing.T) {
	const B = erasure.BlockSize
	c := newBlockCache(3 * B)
	data := make([]byte, 2*B)
	for i := range data {
		data[i] = byte(i * 7)
	}
	c.put(1, 4, 10*B, data)
	got, ok := c.get(1, 4, 10*B+100, B) // spans both blocks
	if !ok || !bytes.Equal(got, data[100:100+B]) {
		t.Fatalf("get across blocks: %v", ok)
	}
	if _, ok := c.get(1, 4, 11*B+1, B); ok {
		t.Fatal("got a range whose second block was never cached")
	}
	if _, ok := c.get(2, 4, 10*B, 10); ok {
		t.Fatal("got another volume's block")
	}
	c.put(1, 5, 0, make([]byte, 2*B)) // over the limit: the oldest block goes
	if _, ok := c.get(1, 4, 10*B, 10); ok {
		t.Fatal("the oldest block was not evicted")
	}
	if _, ok := c.get(1, 5, 0, 2*B); !ok {
		t.Fatal("the newest blocks were evicted")
	}
}
