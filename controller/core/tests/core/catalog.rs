//! The built-in instance catalog and catalog files.
