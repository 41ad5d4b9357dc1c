package adminui

import (
	"bufio"
	"fmt"
	"html"
	"io"
)

// writeTopologySVG draws the topology: one band per data center, one box
// per rack, one square per server coloured by how full its volume slots
// are (green empty, red full); a server that stopped heartbeating or that
// the master cannot reach is grey with a thick red border.
func writeTopologySVG(w io.Writer, tv topoView) {
	const (
		width   = 1000
		cell    = 16
		gap     = 3
		maxCols = 12
		pad     = 8
		label   = 16
	)
	type box struct{ x, y, w, h int }
	// Lay out first to know the height.
	type rackPos struct {
		dc, rack int
		b        box
		cols     int
	}
	var racks []rackPos
	var bands []box
	y := pad
	for di, dc := range tv.DataCenters {
		band := box{x: pad, y: y, w: width - 2*pad}
		y += label + 4
		x, rowH := pad*2, 0
		for ri, rk := range dc.Racks {
			n := max(1, len(rk.Servers))
			cols := min(maxCols, n)
			rows := (n + cols - 1) / cols
			bw := max(cols*(cell+gap)+pad*2-gap, 90)
			bh := label + rows*(cell+gap) + pad
			if x+bw > width-pad*2 && x > pad*2 {
				x, y = pad*2, y+rowH+pad
				rowH = 0
			}
			racks = append(racks, rackPos{dc: di, rack: ri, b: box{x, y, bw, bh}, cols: cols})
			x += bw + pad
			rowH = max(rowH, bh)
		}
		y += rowH + pad
		band.h = y - band.y
		bands = append(bands, band)
		y += pad
	}
	height := max(y, 40)
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11" role="img" aria-label="cluster topology">`,
		width, height, width, height)
	if len(tv.DataCenters) == 0 {
		fmt.Fprintf(bw, `<text x="%d" y="24">no volume servers</text>`, pad)
	}
	for i, b := range bands {
		fmt.Fprintf(bw, `<rect x="%d" y="%d" width="%d" height="%d" rx="6" fill="#eef3f8" stroke="#9ab"/>`, b.x, b.y, b.w, b.h)
		fmt.Fprintf(bw, `<text x="%d" y="%d" font-weight="bold">data center %s</text>`, b.x+6, b.y+label-2, html.EscapeString(tv.DataCenters[i].Name))
	}
	for _, rp := range racks {
		rk := tv.DataCenters[rp.dc].Racks[rp.rack]
		b := rp.b
		fmt.Fprintf(bw, `<rect x="%d" y="%d" width="%d" height="%d" rx="4" fill="#fff" stroke="#bcc"/>`, b.x, b.y, b.w, b.h)
		fmt.Fprintf(bw, `<text x="%d" y="%d">rack %s</text>`, b.x+4, b.y+label-4, html.EscapeString(rk.Name))
		for si, s := range rk.Servers {
			cx := b.x + pad + (si%rp.cols)*(cell+gap)
			cy := b.y + label + (si/rp.cols)*(cell+gap)
			fill, stroke, sw := fillColor(s.Fill), "#555", 1
			state := fmt.Sprintf("%d/%d volumes", s.Volumes, s.MaxVolumes)
			if s.Stale {
				fill, stroke, sw = "#bbb", "#d00", 3
				state += "; " + s.Why
			}
			fmt.Fprintf(bw, `<rect class="server%s" x="%d" y="%d" width="%d" height="%d" fill="%s" stroke="%s" stroke-width="%d"><title>%s: %s</title></rect>`,
				map[bool]string{true: " stale", false: ""}[s.Stale], cx, cy, cell, cell, fill, stroke, sw,
				html.EscapeString(s.URL), html.EscapeString(state))
		}
	}
	bw.WriteString(`</svg>`)
}

// fillColor goes from green (0) through yellow to red (1).
func fillColor(f float64) string {
	f = min(1, max(0, f))
	var r, g int
	if f < 0.5 {
		r, g = int(510*f), 200
	} else {
		r, g = 255, int(200*(1-f)*2)
	}
	return fmt.Sprintf("#%02x%02x40", r, g)
}
