package objectapi

import "strings"

// resourceFitsBucket reports whether a policy's Resource pattern can match
// the bucket's ARN or the ARN of some object in it. A bucket's policy
// governs only that bucket, so a pattern that can match neither (another
// bucket's) is refused as AWS refuses it ("Policy has invalid resource");
// wildcards that also match other buckets ("arn:aws:s3:::*",
// "arn:aws:s3:::buck*/key*") are valid, and apply here to this
// bucket only. The pattern must be an S3 ARN ("*" alone is refused, as
// it names no S3 resource).
func resourceFitsBucket(pattern, bucket string) bool {
	if !strings.HasPrefix(pattern, arnPrefix) {
		return false
	}
	arn := arnPrefix + bucket
	return Glob(pattern, arn) || globMatchesSomeExtension(pattern, arn+"/")
}

// globMatchesSomeExtension reports whether pattern (Glob's syntax) matches
// some string that begins with prefix: it runs the pattern as a set of
// positions over prefix; whatever position survives can be completed,
// since the rest of the string is free.
func globMatchesSomeExtension(pattern, prefix string) bool {
	states := closure(pattern, map[int]bool{0: true})
	for i := 0; i < len(prefix) && len(states) > 0; i++ {
		next := map[int]bool{}
		for p := range states {
			switch {
			case p >= len(pattern):
			case pattern[p] == '*':
				next[p] = true // '*' takes this byte and may take more
			case pattern[p] == '?' || pattern[p] == prefix[i]:
				next[p+1] = true
			}
		}
		states = closure(pattern, next)
	}
	return len(states) > 0
}

// closure adds the positions reached by letting a '*' match nothing.
func closure(pattern string, states map[int]bool) map[int]bool {
	for p := range states {
		for q := p; q < len(pattern) && pattern[q] == '*'; q++ {
			states[q+1] = true
		}
	}
	return states
}
