//! HDF5 inputs (feature `hdf5`), read through the HDF5 C library.
