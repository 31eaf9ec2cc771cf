//! Interruption messages: parsing and golden shapes.
