//! Per-cell metadata (obs) stored beside the tiles as Parquet shards, and the
//! gene table (`var.parquet`). See the format spec, section "Obs".
