package s3

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestAbsentConfigurationsReadAsS3Answers: the bucket settings Kelp does
// not have read as S3 answers for a bucket without them, through the SDK
// (whose parsers check the documents); turning one on is NotImplemented,
// asking for the state the bucket has succeeds, and only the owner may ask.
func TestAbsentConfigurationsReadAsS3Answers(t *testing.T) {
	a := startAccounts(t, nil)
	ctx, b := a.ctx, aws.String("absent")
	_, err := a.alice.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b})
	a.must(err)

	logging, err := a.alice.GetBucketLogging(ctx, &s3.GetBucketLoggingInput{Bucket: b})
	a.must(err)
	if logging.LoggingEnabled != nil {
		t.Fatal("GetBucketLogging: logging enabled")
	}
	pay, err := a.alice.GetBucketRequestPayment(ctx, &s3.GetBucketRequestPaymentInput{Bucket: b})
	a.must(err)
	if pay.Payer != types.PayerBucketOwner {
		t.Fatalf("GetBucketRequestPayment: payer %q", pay.Payer)
	}
	acc, err := a.alice.GetBucketAccelerateConfiguration(ctx, &s3.GetBucketAccelerateConfigurationInput{Bucket: b})
	a.must(err)
	if acc.Status != "" {
		t.Fatalf("GetBucketAccelerateConfiguration: status %q", acc.Status)
	}
	nc, err := a.alice.GetBucketNotificationConfiguration(ctx, &s3.GetBucketNotificationConfigurationInput{Bucket: b})
	a.must(err)
	if len(nc.TopicConfigurations)+len(nc.QueueConfigurations)+len(nc.LambdaFunctionConfigurations) != 0 || nc.EventBridgeConfiguration != nil {
		t.Fatal("GetBucketNotificationConfiguration: notifications configured")
	}
	_, err = a.alice.GetBucketReplication(ctx, &s3.GetBucketReplicationInput{Bucket: b})
	a.wantCode(err, "ReplicationConfigurationNotFoundError")

	id := aws.String("report")
	_, err = a.alice.GetBucketAnalyticsConfiguration(ctx, &s3.GetBucketAnalyticsConfigurationInput{Bucket: b, Id: id})
	a.wantCode(err, "NoSuchConfiguration")
	_, err = a.alice.GetBucketInventoryConfiguration(ctx, &s3.GetBucketInventoryConfigurationInput{Bucket: b, Id: id})
	a.wantCode(err, "NoSuchConfiguration")
	_, err = a.alice.GetBucketMetricsConfiguration(ctx, &s3.GetBucketMetricsConfigurationInput{Bucket: b, Id: id})
	a.wantCode(err, "NoSuchConfiguration")
	_, err = a.alice.GetBucketIntelligentTieringConfiguration(ctx, &s3.GetBucketIntelligentTieringConfigurationInput{Bucket: b, Id: id})
	a.wantCode(err, "NoSuchConfiguration")
	al, err := a.alice.ListBucketAnalyticsConfigurations(ctx, &s3.ListBucketAnalyticsConfigurationsInput{Bucket: b})
	a.must(err)
	il, err := a.alice.ListBucketInventoryConfigurations(ctx, &s3.ListBucketInventoryConfigurationsInput{Bucket: b})
	a.must(err)
	ml, err := a.alice.ListBucketMetricsConfigurations(ctx, &s3.ListBucketMetricsConfigurationsInput{Bucket: b})
	a.must(err)
	tl, err := a.alice.ListBucketIntelligentTieringConfigurations(ctx, &s3.ListBucketIntelligentTieringConfigurationsInput{Bucket: b})
	a.must(err)
	if len(al.AnalyticsConfigurationList)+len(il.InventoryConfigurationList)+len(ml.MetricsConfigurationList)+
		len(tl.IntelligentTieringConfigurationList) != 0 || aws.ToBool(al.IsTruncated) || aws.ToBool(tl.IsTruncated) {
		t.Fatal("a report listing is not empty")
	}

	// Turning a feature on is refused; the state the bucket has is fine.
	_, err = a.alice.PutBucketLogging(ctx, &s3.PutBucketLoggingInput{Bucket: b, BucketLoggingStatus: &types.BucketLoggingStatus{
		LoggingEnabled: &types.LoggingEnabled{TargetBucket: b, TargetPrefix: aws.String("logs/")}}})
	a.wantCode(err, "NotImplemented")
	_, err = a.alice.PutBucketLogging(ctx, &s3.PutBucketLoggingInput{Bucket: b, BucketLoggingStatus: &types.BucketLoggingStatus{}})
	a.must(err)
	_, err = a.alice.PutBucketRequestPayment(ctx, &s3.PutBucketRequestPaymentInput{Bucket: b,
		RequestPaymentConfiguration: &types.RequestPaymentConfiguration{Payer: types.PayerRequester}})
	a.wantCode(err, "NotImplemented")
	_, err = a.alice.PutBucketRequestPayment(ctx, &s3.PutBucketRequestPaymentInput{Bucket: b,
		RequestPaymentConfiguration: &types.RequestPaymentConfiguration{Payer: types.PayerBucketOwner}})
	a.must(err)
	_, err = a.alice.PutBucketAccelerateConfiguration(ctx, &s3.PutBucketAccelerateConfigurationInput{Bucket: b,
		AccelerateConfiguration: &types.AccelerateConfiguration{Status: types.BucketAccelerateStatusEnabled}})
	a.wantCode(err, "NotImplemented")
	_, err = a.alice.PutBucketAccelerateConfiguration(ctx, &s3.PutBucketAccelerateConfigurationInput{Bucket: b,
		AccelerateConfiguration: &types.AccelerateConfiguration{Status: types.BucketAccelerateStatusSuspended}})
	a.must(err)
	_, err = a.alice.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: b,
		NotificationConfiguration: &types.NotificationConfiguration{QueueConfigurations: []types.QueueConfiguration{
			{QueueArn: aws.String("arn:aws:sqs:us-east-1:1:q"), Events: []types.Event{types.EventS3ObjectCreated}}}}})
	a.wantCode(err, "NotImplemented")
	_, err = a.alice.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: b,
		NotificationConfiguration: &types.NotificationConfiguration{}})
	a.must(err)
	st, _ := a.raw("PUT", "/absent?requestPayment", []byte("<RequestPaymentConfiguration><Payer>Nobody</Payer></RequestPaymentConfiguration>"), nil)
	if st.StatusCode != 400 {
		t.Fatalf("a PutBucketRequestPayment with an unknown payer answered %s, want 400 MalformedXML", st.Status)
	}

	// Deleting what no bucket has.
	_, err = a.alice.DeleteBucketReplication(ctx, &s3.DeleteBucketReplicationInput{Bucket: b})
	a.must(err)
	_, err = a.alice.DeleteBucketWebsite(ctx, &s3.DeleteBucketWebsiteInput{Bucket: b})
	a.must(err)
	_, err = a.alice.DeleteBucketMetricsConfiguration(ctx, &s3.DeleteBucketMetricsConfigurationInput{Bucket: b, Id: id})
	a.wantCode(err, "NoSuchConfiguration")

	// The bucket's owner only, and a missing bucket is NoSuchBucket.
	_, err = a.bob.GetBucketLogging(ctx, &s3.GetBucketLoggingInput{Bucket: b})
	a.wantCode(err, "AccessDenied")
	_, err = a.bob.DeleteBucketReplication(ctx, &s3.DeleteBucketReplicationInput{Bucket: b})
	a.wantCode(err, "AccessDenied")
	_, err = a.c.GetBucketRequestPayment(ctx, &s3.GetBucketRequestPaymentInput{Bucket: aws.String("no-such-bucket")})
	a.wantCode(err, "NoSuchBucket")
}
