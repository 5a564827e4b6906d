//! Parquet copies of the study tables (feature `parquet`): the same columns as the CSV files,
//! `index` as INT64 and every other column as DOUBLE, Snappy-compressed, one row group per
//! 65 536 rows.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use parquet::basic::{Compression, Repetition, Type as PhysicalType};
use parquet::data_type::{DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;

use super::CliError;

fn err(path: &Path) -> impl Fn(parquet::errors::ParquetError) -> CliError + '_ {
    move |e| CliError::Io {
        path: path.display().to_string(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// Writes `rows` (`(index, values)`, values in `columns` order) to `path`.
pub fn write_parquet(
    path: &Path,
    columns: &[String],
    rows: &[(usize, Vec<f64>)],
) -> Result<(), CliError> {
    let e = err(path);
    let field = |name: &str, t: PhysicalType| {
        Type::primitive_type_builder(name, t)
            .with_repetition(Repetition::REQUIRED)
            .build()
            .map(Arc::new)
    };
    let mut fields = vec![field("index", PhysicalType::INT64).map_err(&e)?];
    for c in columns {
        fields.push(field(c, PhysicalType::DOUBLE).map_err(&e)?);
    }
    let schema = Arc::new(
        Type::group_type_builder("simbatch")
            .with_fields(fields)
            .build()
            .map_err(&e)?,
    );
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build(),
    );
    let file = File::create(path).map_err(|source| CliError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let mut writer = SerializedFileWriter::new(file, schema, props).map_err(&e)?;
    for chunk in rows.chunks(1 << 16) {
        let mut group = writer.next_row_group().map_err(&e)?;
        let mut k = 0;
        while let Some(mut column) = group.next_column().map_err(&e)? {
            if k == 0 {
                let values: Vec<i64> = chunk.iter().map(|(i, _)| *i as i64).collect();
                column
                    .typed::<Int64Type>()
                    .write_batch(&values, None, None)
                    .map_err(&e)?;
            } else {
                let values: Vec<f64> = chunk.iter().map(|(_, v)| v[k - 1]).collect();
                column
                    .typed::<DoubleType>()
                    .write_batch(&values, None, None)
                    .map_err(&e)?;
            }
            column.close().map_err(&e)?;
            k += 1;
        }
        group.close().map_err(&e)?;
    }
    writer.close().map_err(&e)?;
    Ok(())
}
