//! The phase DAG.
