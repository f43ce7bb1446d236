package pool

// TEMPORARY until the helpers' branches merge (deleted then).


type ListFilter struct {
	State, Office string
	Metadata      map[string]string
}

