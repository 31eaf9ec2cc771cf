//! kind-based end-to-end suite (real cluster, real chart, fakecloud as the cloud). Not built yet.
