package testserver

import (
	"fmt"
	"image"

	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode"
)

// DecodeQR reads the text of the QR code in img with gozxing, a port of the ZXing
// scanner: the same kind of reader a phone's camera app runs, so a page's QR code
// that decodes here is one a person can scan.
func DecodeQR(img image.Image) (string, error) {
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		return "", fmt.Errorf("qr: %w", err)
	}
	// The finder-pattern detector first, as a camera's scan; then the reader of a
	// clean, upright symbol, whose module-size estimate a fixed-size rendering with
	// uneven modules can throw off where the detector's does not (and vice versa).
	var res *gozxing.Result
	for _, pure := range []bool{false, true} {
		if res, err = qrcode.NewQRCodeReader().Decode(bmp, map[gozxing.DecodeHintType]any{gozxing.DecodeHintType_PURE_BARCODE: pure}); err == nil {
			return res.GetText(), nil
		}
	}
	return "", fmt.Errorf("qr: %w", err)
}
