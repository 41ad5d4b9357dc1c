package objectapi

// fixingConditionKeys are the condition keys that tie an Allow to known
// requesters, so that a statement for Principal "*" that tests one of them
// (not negated) is not public. S3 counts these (and VPC and service keys
// that Kelp does not have).
var fixingConditionKeys = map[string]bool{
	"aws:sourceip": true, "aws:userid": true, "aws:username": true,
	"aws:sourcearn": true, "aws:sourceaccount": true, "aws:sourceowner": true,
	"aws:principalaccount": true, "aws:principalarn": true, "aws:principalorgid": true,
	"aws:sourcevpc": true, "aws:sourcevpce": true,
}

// IsPublic reports whether the policy is public as S3 defines it for
// GetBucketPolicyStatus and public access blocks: some Allow statement
// names Principal "*" and no condition of it fixes the requester to known
// values.
func (p *Policy) IsPublic() bool {
	for i := range p.Statements {
		st := &p.Statements[i]
		if st.Deny || !st.matchesPrincipal(nil) { // nil: only "*" matches
			continue
		}
		if !st.fixesRequester() {
			return true
		}
	}
	return false
}

// fixesRequester reports whether a condition narrows the statement to
// known requesters (a positive test of a fixing key, not IfExists).
func (st *PolicyStatement) fixesRequester() bool {
	for _, c := range st.conditions {
		if fixingConditionKeys[c.key] && !c.negated && !c.ifExists {
			return true
		}
	}
	return false
}
