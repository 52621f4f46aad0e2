package testserver

import (
	"errors"
	"fmt"
	"image"
	"strings"
)

// DecodeQR reads the text of a QR code in a clean, axis-aligned rendering such
// as a server-made PNG: it finds the symbol's bounding box, tries each version's
// module grid until the finder and timing patterns and the format information
// fit, then reads, deinterleaves and checks (Reed-Solomon syndromes) the
// codewords and decodes the numeric, alphanumeric and byte segments. It is a
// test oracle, not a scanner: no perspective, no error correction.
func DecodeQR(img image.Image) (string, error) {
	b := img.Bounds()
	dark := func(x, y int) bool {
		r, g, bl, a := img.At(x, y).RGBA()
		if a < 0x8000 {
			return false // transparent counts as background
		}
		return (299*r+587*g+114*bl)/1000 < 0x8000
	}
	minX, minY, maxX, maxY := b.Max.X, b.Max.Y, b.Min.X-1, b.Min.Y-1
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if dark(x, y) {
				minX, minY, maxX, maxY = min(minX, x), min(minY, y), max(maxX, x), max(maxY, y)
			}
		}
	}
	if maxX < minX {
		return "", errors.New("qr: no dark pixel in the image")
	}
	w, h := float64(maxX-minX+1), float64(maxY-minY+1)
	var lastErr error = errors.New("qr: no version fits the image")
	for ver := 1; ver <= 40; ver++ {
		n := 17 + 4*ver
		if w/float64(n) < 1 || h/float64(n) < 1 {
			break
		}
		grid := make([][]bool, n)
		for r := range grid {
			grid[r] = make([]bool, n)
			for c := range grid[r] {
				grid[r][c] = dark(minX+int((float64(c)+0.5)*w/float64(n)), minY+int((float64(r)+0.5)*h/float64(n)))
			}
		}
		if !hasFinders(grid) {
			continue
		}
		text, err := decodeGrid(grid, ver)
		if err == nil {
			return text, nil
		}
		lastErr = err
	}
	return "", lastErr
}

// hasFinders checks the three finder patterns and the two timing patterns.
func hasFinders(g [][]bool) bool {
	n := len(g)
	for _, o := range [][2]int{{0, 0}, {0, n - 7}, {n - 7, 0}} {
		for r := range 7 {
			for c := range 7 {
				ring := max(abs(r-3), abs(c-3))
				if g[o[0]+r][o[1]+c] != (ring != 2) {
					return false
				}
			}
		}
	}
	for i := 8; i < n-8; i++ {
		if g[6][i] != (i%2 == 0) || g[i][6] != (i%2 == 0) {
			return false
		}
	}
	return true
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Error correction levels in the order of the tables below.
const (
	eclL = iota
	eclM
	eclQ
	eclH
)

// decodeGrid decodes a sampled module grid of version ver.
func decodeGrid(g [][]bool, ver int) (string, error) {
	n := len(g)
	var bits uint32
	read := func(r, c int) {
		bits <<= 1
		if g[r][c] {
			bits |= 1
		}
	}
	for c := 0; c <= 5; c++ {
		read(8, c)
	}
	read(8, 7)
	read(8, 8)
	read(7, 8)
	for r := 5; r >= 0; r-- {
		read(r, 8)
	}
	ecl, mask, ok := formatInfo(bits)
	if !ok {
		return "", fmt.Errorf("qr: version %d: invalid format information %015b", ver, bits)
	}

	fn := functionModules(ver)
	var codewords []byte
	var cur byte
	nbits := 0
	for right := n - 1; right >= 1; right -= 2 {
		if right == 6 {
			right = 5
		}
		for vert := range n {
			for j := range 2 {
				c := right - j
				r := vert
				if (right+1)&2 == 0 {
					r = n - 1 - vert
				}
				if fn[r][c] {
					continue
				}
				bit := g[r][c] != maskBit(mask, r, c)
				cur <<= 1
				if bit {
					cur |= 1
				}
				if nbits++; nbits%8 == 0 {
					codewords = append(codewords, cur)
					cur = 0
				}
			}
		}
	}

	total := rawDataModules(ver) / 8
	if len(codewords) < total {
		return "", fmt.Errorf("qr: version %d: read %d codewords, want %d", ver, len(codewords), total)
	}
	numBlocks := eccBlocks[ecl][ver]
	eccLen := eccPerBlock[ecl][ver]
	shortLen := total / numBlocks
	numShort := numBlocks - total%numBlocks
	blocks := make([][]byte, numBlocks)
	k := 0
	for i := 0; i <= shortLen-eccLen; i++ { // data codewords, interleaved
		for j := range blocks {
			if i < shortLen-eccLen || j >= numShort {
				blocks[j] = append(blocks[j], codewords[k])
				k++
			}
		}
	}
	for i := 0; i < eccLen; i++ { // error correction codewords, interleaved
		for j := range blocks {
			blocks[j] = append(blocks[j], codewords[k])
			k++
		}
	}
	var data []byte
	for j, blk := range blocks {
		if !rsValid(blk, eccLen) {
			return "", fmt.Errorf("qr: version %d: block %d fails its Reed-Solomon check", ver, j)
		}
		data = append(data, blk[:len(blk)-eccLen]...)
	}
	return decodeSegments(data, ver)
}

// formatInfo finds the format information nearest (at most 3 bits away) to bits.
func formatInfo(bits uint32) (ecl, mask int, ok bool) {
	best, bestDist := -1, 4
	for v := range 32 {
		rem := uint32(v)
		for range 10 {
			rem = (rem << 1) ^ ((rem >> 9) * 0x537)
		}
		code := (uint32(v)<<10 | rem) ^ 0x5412
		if d := popcount(code ^ bits); d < bestDist {
			best, bestDist = v, d
		}
	}
	if best < 0 {
		return 0, 0, false
	}
	// The two ECL bits encode L=01, M=00, Q=11, H=10.
	return [4]int{eclM, eclL, eclH, eclQ}[best>>3], best & 7, true
}

func popcount(x uint32) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

func maskBit(mask, r, c int) bool {
	switch mask {
	case 0:
		return (r+c)%2 == 0
	case 1:
		return r%2 == 0
	case 2:
		return c%3 == 0
	case 3:
		return (r+c)%3 == 0
	case 4:
		return (r/2+c/3)%2 == 0
	case 5:
		return r*c%2+r*c%3 == 0
	case 6:
		return (r*c%2+r*c%3)%2 == 0
	default:
		return ((r+c)%2+r*c%3)%2 == 0
	}
}

// alignmentPositions are the centre coordinates of the alignment patterns.
func alignmentPositions(ver int) []int {
	if ver == 1 {
		return nil
	}
	num := ver/7 + 2
	step := 26
	if ver != 32 {
		step = (ver*4 + num*2 + 1) / (num*2 - 2) * 2
	}
	pos := []int{6}
	for p, i := 17+4*ver-7, 0; i < num-1; p, i = p-step, i+1 {
		pos = append(pos[:1], append([]int{p}, pos[1:]...)...)
	}
	return pos
}

// functionModules marks the modules that carry no data.
func functionModules(ver int) [][]bool {
	n := 17 + 4*ver
	fn := make([][]bool, n)
	for i := range fn {
		fn[i] = make([]bool, n)
	}
	rect := func(r, c, h, w int) {
		for y := r; y < r+h; y++ {
			for x := c; x < c+w; x++ {
				fn[y][x] = true
			}
		}
	}
	rect(0, 0, 9, 9)   // top-left finder, separator, format
	rect(0, n-8, 9, 8) // top-right finder, separator, format
	rect(n-8, 0, 8, 9) // bottom-left finder, separator, format, dark module
	rect(6, 0, 1, n)   // timing
	rect(0, 6, n, 1)
	pos := alignmentPositions(ver)
	for i, y := range pos {
		for j, x := range pos {
			if (i == 0 && j == 0) || (i == 0 && j == len(pos)-1) || (i == len(pos)-1 && j == 0) {
				continue
			}
			rect(y-2, x-2, 5, 5)
		}
	}
	if ver >= 7 {
		rect(0, n-11, 6, 3) // version information
		rect(n-11, 0, 3, 6)
	}
	return fn
}

func rawDataModules(ver int) int {
	r := (16*ver+128)*ver + 64
	if ver >= 2 {
		num := ver/7 + 2
		r -= (25*num-10)*num - 55
		if ver >= 7 {
			r -= 36
		}
	}
	return r
}

// rsValid checks a block (data then eccLen error correction codewords) against
// the Reed-Solomon code of QR codes (GF(256), polynomial 0x11D): the remainder
// of the data times x^eccLen by the generator must equal the ECC codewords.
func rsValid(block []byte, eccLen int) bool {
	gen := []byte{1}
	root := byte(1)
	for range eccLen {
		next := make([]byte, len(gen)+1)
		for i, g := range gen {
			next[i] ^= g
			next[i+1] ^= gfMul(g, root)
		}
		gen = next
		root = gfMul(root, 2)
	}
	data := block[:len(block)-eccLen]
	rem := make([]byte, eccLen)
	for _, d := range data {
		f := d ^ rem[0]
		copy(rem, rem[1:])
		rem[eccLen-1] = 0
		for i := range rem {
			rem[i] ^= gfMul(gen[i+1], f)
		}
	}
	return string(rem) == string(block[len(data):])
}

func gfMul(x, y byte) byte {
	var z byte
	for i := 7; i >= 0; i-- {
		hi := z & 0x80
		z <<= 1
		if hi != 0 {
			z ^= 0x1D
		}
		if (y>>i)&1 != 0 {
			z ^= x
		}
	}
	return z
}

// decodeSegments decodes the data codewords' segments.
func decodeSegments(data []byte, ver int) (string, error) {
	pos := 0
	take := func(n int) (int, bool) {
		if pos+n > len(data)*8 {
			return 0, false
		}
		v := 0
		for range n {
			v = v<<1 | int(data[pos/8]>>(7-pos%8)&1)
			pos++
		}
		return v, true
	}
	class := 0 // character count widths by version class
	if ver >= 27 {
		class = 2
	} else if ver >= 10 {
		class = 1
	}
	const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ $%*+-./:"
	var out strings.Builder
	for {
		mode, ok := take(4)
		if !ok || mode == 0 {
			return out.String(), nil
		}
		switch mode {
		case 1: // numeric
			count, _ := take([3]int{10, 12, 14}[class])
			for count > 0 {
				digits := min(count, 3)
				v, ok := take([4]int{0, 4, 7, 10}[digits])
				if !ok {
					return "", errors.New("qr: truncated numeric segment")
				}
				fmt.Fprintf(&out, "%0*d", digits, v)
				count -= digits
			}
		case 2: // alphanumeric
			count, _ := take([3]int{9, 11, 13}[class])
			for ; count >= 2; count -= 2 {
				v, ok := take(11)
				if !ok || v/45 >= 45 {
					return "", errors.New("qr: bad alphanumeric segment")
				}
				out.WriteByte(alnum[v/45])
				out.WriteByte(alnum[v%45])
			}
			if count == 1 {
				v, ok := take(6)
				if !ok || v >= 45 {
					return "", errors.New("qr: bad alphanumeric segment")
				}
				out.WriteByte(alnum[v])
			}
		case 4: // bytes
			count, _ := take([3]int{8, 16, 16}[class])
			for range count {
				v, ok := take(8)
				if !ok {
					return "", errors.New("qr: truncated byte segment")
				}
				out.WriteByte(byte(v))
			}
		case 7: // ECI designator: ignored, the bytes are taken as they are
			if first, _ := take(8); first&0x80 != 0 {
				take(8)
				if first&0x40 != 0 {
					take(8)
				}
			}
		default:
			return "", fmt.Errorf("qr: unsupported segment mode %04b", mode)
		}
	}
}

// eccPerBlock and eccBlocks are the error correction codewords per block and
// the number of blocks, by error correction level (L, M, Q, H) and version.
var eccPerBlock = [4][41]int{
	{-1, 7, 10, 15, 20, 26, 18, 20, 24, 30, 18, 20, 24, 26, 30, 22, 24, 28, 30, 28, 28, 28, 28, 30, 30, 26, 28, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30},
	{-1, 10, 16, 26, 18, 24, 16, 18, 22, 22, 26, 30, 22, 22, 24, 24, 28, 28, 26, 26, 26, 26, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28},
	{-1, 13, 22, 18, 26, 18, 24, 18, 22, 20, 24, 28, 26, 24, 20, 30, 24, 28, 28, 26, 30, 28, 30, 30, 30, 30, 28, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30},
	{-1, 17, 28, 22, 16, 22, 28, 26, 26, 24, 28, 24, 28, 22, 24, 24, 30, 28, 28, 26, 28, 30, 24, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30},
}

var eccBlocks = [4][41]int{
	{-1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4, 4, 6, 6, 6, 6, 7, 8, 8, 9, 9, 10, 12, 12, 12, 13, 14, 15, 16, 17, 18, 19, 19, 20, 21, 22, 24, 25},
	{-1, 1, 1, 1, 2, 2, 4, 4, 4, 5, 5, 5, 8, 9, 9, 10, 10, 11, 13, 14, 16, 17, 17, 18, 20, 21, 23, 25, 26, 28, 29, 31, 33, 35, 37, 38, 40, 43, 45, 47, 49},
	{-1, 1, 1, 2, 2, 4, 4, 6, 6, 8, 8, 8, 10, 12, 16, 12, 17, 16, 18, 21, 20, 23, 23, 25, 27, 29, 34, 34, 35, 38, 40, 43, 45, 48, 51, 53, 56, 59, 62, 65, 68},
	{-1, 1, 1, 2, 4, 4, 4, 5, 6, 8, 8, 11, 11, 16, 16, 18, 16, 19, 21, 25, 25, 25, 34, 30, 32, 35, 37, 40, 42, 45, 48, 51, 54, 57, 60, 63, 66, 70, 74, 77, 81},
}
