package backup

import (
	"context"
	"errors"
)

// S3Config reaches an S3 destination.
type S3Config struct {
	Endpoint  string // e.g. http://127.0.0.1:8333; "" = AWS
	Region    string
	AccessKey string
	SecretKey string
}

func openS3(ctx context.Context, spec string, cfg S3Config) (Dest, error) {
	return nil, errors.New("backup: s3:// destinations are not implemented yet")
}
