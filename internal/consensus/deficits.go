package consensus

import (
	"context"
	"slices"
	"time"
)

// Deficit records that only the copies at Good (volume server URLs, sorted)
// are known to hold every acknowledged write of a volume; its other copies
// must be caught up before they count.
type Deficit struct {
	Since time.Time `json:"since"`
	Cause string    `json:"cause,omitempty"`
	Good  []string  `json:"good"`
}

// Equal reports whether two records say the same.
func (d Deficit) Equal(o Deficit) bool {
	return d.Since.Equal(o.Since) && d.Cause == o.Cause && slices.Equal(d.Good, o.Good)
}

// SetDeficits commits a change of the deficit table: the records in set are
// stored (replacing older ones of the same volumes), those of clear removed.
func (n *Node) SetDeficits(ctx context.Context, set map[uint32]Deficit, clear []uint32) error {
	if len(set) == 0 && len(clear) == 0 {
		return nil
	}
	_, err := n.apply(ctx, cmdSetDeficits, &setDeficits{Set: set, Clear: clear})
	return err
}

// Deficits returns a copy of the committed deficit table as this node has
// applied it.
func (n *Node) Deficits() map[uint32]Deficit {
	n.fsm.mu.Lock()
	defer n.fsm.mu.Unlock()
	out := make(map[uint32]Deficit, len(n.fsm.state.Deficits))
	for vid, d := range n.fsm.state.Deficits {
		d.Good = slices.Clone(d.Good)
		out[vid] = d
	}
	return out
}
