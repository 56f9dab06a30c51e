; helixflow pipelines are KDL: the kdl queries apply unchanged.
; inherits: kdl
