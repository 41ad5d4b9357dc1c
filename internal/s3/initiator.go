package s3

// initiatorName is what an upload records as its initiator: the
// identity's name ("" for an anonymous request).
func (rq *request) initiatorName() string {
	if rq.id == nil {
		return ""
	}
	return rq.id.Name
}

// uploadOwner is the Initiator and Owner a listing shows for an upload
// created by the identity named name: the same owner that identity sees
// for itself.
func (s *Server) uploadOwner(name string) owner {
	if name != "" {
		for _, e := range s.ids.Load().byKey {
			if e.id.Name == name {
				return (&request{id: e.id}).owner()
			}
		}
		return owner{ID: name, DisplayName: name} // removed since
	}
	return (&request{}).owner()
}
